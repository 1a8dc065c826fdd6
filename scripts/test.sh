#!/usr/bin/env bash
# `deno task test`: every test tier, in order, with one summary at the end.
#   1. builds    started in the background at once (cached outside the repo; seconds when cached;
#                cold on 2 cores ~16.5 min for the engine, ~10 min for the Kubernetes binaries,
#                the first run ~34 min in all): the Go chain — the real kube-apiserver tier and
#                the suite's kubectl, the real node's binaries, versitygw, csi-sanity, the soak
#                test's grpc-go client — and our Rust engine mount-s3 (scripts/build_engine.sh).
#                Every 30 s while one runs: "=== build NAME: running for XmYYs: <last log line>"
#   2. ok        fmt check, lint, layers, type check, unit tests (no permissions)
#   3. gen       generated files match their generators
#   4. tests/    integration tiers (real processes, FUSE, S3, API servers) in one deno process per
#                folder, ordered so the cold builds overlap them: first the tiers that need none
#                of the builds, then (once the Go chain is built and the real kube-apiserver
#                started; its kubectl is exported as KUBECTL) those that use it, then those that
#                run our engine, then the real-node tier. A test that cannot run here is
#                registered and reported as skipped, with its reason in its name
#   5. leftovers nothing the suite started is left mounted, running or listening
#                (scripts/leftovers.ts)
# The summary counts tests and their steps (t.step) apart, lists every skipped test with its
# reason, and ends with a line "N passed, N failed, N skipped" (tests).
#
# Fail closed: a failed step, test, build or leak check fails the run. Under CI (CI=true) so does
# every skipped test and every service that cannot start; locally those are reported loudly at the
# end (and the run passes if nothing failed).
#
# As root, where `unshare` works, the suite runs in PID and mount namespaces of its own: every
# process it leaves is found (and killed with the namespace), every mount it leaves is found,
# however many other runs share the machine. S3CSI_TEST_NO_NS=1 turns that off; KEEP_SERVICES=1
# does too (the kept services must outlive the run).
#
# Set TEST_FILTER to pass --filter to deno test; TEST_PATHS to run only some paths of tests/;
# KEEP_SERVICES=1 leaves RGW and the real API server running; SKIP_RGW=1 / SKIP_KUBE_REAL=1 skip
# them (their tests are then skipped; under CI that fails the run).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# ---- own PID and mount namespaces (see above) --------------------------------------------------
if [ -z "${S3CSI_TEST_NS:-}" ] && [ "${S3CSI_TEST_NO_NS:-}" != "1" ] &&
  [ "${KEEP_SERVICES:-}" != "1" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null &&
  unshare --pid --fork --mount --propagation private --mount-proc true 2>/dev/null; then
  export S3CSI_TEST_NS=1
  # bash stays PID 1 of the namespace (it reaps orphaned daemons); when it exits, the kernel
  # kills whatever is left in the namespace.
  exec unshare --pid --fork --mount --propagation private --mount-proc \
    bash -c 'bash "$@"; exit $?' bash "${BASH_SOURCE[0]}" "$@"
fi
[ -n "${S3CSI_TEST_NS:-}" ] || export S3CSI_TEST_NS=0
export S3CSI_TEST_RUN="${S3CSI_TEST_RUN:-$(date +%s)-$$}"

CI_STRICT=0
[ "${CI:-}" = "true" ] && CI_STRICT=1
# Prerequisite: the tests run the mounter from this clone as uid 1000 (the Mountpoint Pod's user).
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
  ! setpriv --reuid=1000 --regid=1000 --clear-groups test -r src/cmd/mounter/main.ts 2>/dev/null; then
  echo "=== prerequisite FAILED: uid 1000 cannot read $PWD/src/cmd/mounter/main.ts; the tests run the mounter from this clone as uid 1000 (the Mountpoint Pod's user). Clone it where other users can read it (e.g. /srv or /opt; /root is private), or make its parent directories searchable (chmod o+x)." >&2
  exit 1
fi
REPORTS="$PWD/dist/test-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
failed_steps=()
unavailable=()

step() {
  local name="$1"; shift
  printf '\n=== %s: %s\n' "$name" "$*" >&2
  local started=$SECONDS
  if "$@"; then
    printf '=== %s passed in %ss\n' "$name" $((SECONDS - started)) >&2
  else
    printf '=== %s FAILED in %ss\n' "$name" $((SECONDS - started)) >&2
    failed_steps+=("$name")
  fi
}

filter=()
[ -n "${TEST_FILTER:-}" ] && filter=(--filter "$TEST_FILTER")

deno run -A scripts/leftovers.ts snapshot "$REPORTS/leftovers-before.json" ||
  failed_steps+=("leftovers-snapshot")

# ---- services and background builds -------------------------------------------------------------
stop_services() {
  [ "${KEEP_SERVICES:-}" = "1" ] && return 0
  [ -n "${RGW_STARTED:-}" ] && bash tests/testbed/services/s3/rgw_stop.sh >/dev/null 2>&1
  [ -n "${KUBE_REAL_STARTED:-}" ] && bash tests/testbed/services/kube_real/stop.sh >/dev/null 2>&1
  RGW_STARTED="" KUBE_REAL_STARTED=""
  local pid
  for pid in "${GO_BUILD_PID:-}" "${ENGINE_BUILD_PID:-}" "${PROGRESS_PID:-}"; do
    [ -n "$pid" ] || continue
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  GO_BUILD_PID="" ENGINE_BUILD_PID="" PROGRESS_PID=""
  # The real-node tier stops its node itself; if it died before that, stop it here.
  if [ -n "${REAL_NODE_TIER_RAN:-}" ] && [ -s "${REAL_NODE_STATE:-/var/tmp/s3csi-real-node}/kubelet.pid" ]; then
    bash tests/testbed/services/real_node/stop.sh >dist/real-node-stop.log 2>&1
  fi
  return 0
}
trap stop_services EXIT
# A service the tests need that cannot start: a failure under CI, a loud line otherwise.
service_unavailable() {
  printf '=== service %s UNAVAILABLE: %s\n' "$1" "$2" >&2
  unavailable+=("$1: $2")
  [ "$CI_STRICT" = 1 ] && failed_steps+=("service-$1")
  return 0
}
# build NAME SCRIPT [ARGS...]: run a build script, log in dist/build-NAME.log, exit code in
# dist/build-NAME.rc (0 built, 3 cannot build here, else failed).
build() {
  local name="$1" rc=0; shift
  date +%s >"dist/build-$name.start"
  bash "$@" >"dist/build-$name.log" 2>&1 || rc=$?
  echo "$rc" >"dist/build-$name.rc"
  return 0
}
# build_result NAME: 0 when built; else reports the build as unavailable and returns 1.
build_result() {
  local name="$1" rc
  rc=$(cat "dist/build-$name.rc" 2>/dev/null || echo missing)
  case "$rc" in
  0) return 0 ;;
  3) service_unavailable "$name" "cannot build here: $(tail -1 "dist/build-$name.log")" ;;
  missing) service_unavailable "$name" "not built (its build did not run)" ;;
  *) service_unavailable "$name" "build failed (exit $rc; dist/build-$name.log): $(tail -1 "dist/build-$name.log")" ;;
  esac
  return 1
}
# build_progress: one line per build still running: its name, time so far and stage (the last line
# its log shows: the script's own step, or cargo's "Compiling <crate>"). Returns 1 when none runs.
build_progress() {
  local f name start stage now any=1
  now=$(date +%s)
  for f in dist/build-*.start; do
    [ -e "$f" ] || continue
    name=${f#dist/build-} && name=${name%.start}
    [ -e "dist/build-$name.rc" ] && continue
    any=0
    start=$(cat "$f")
    stage=$(tail -c 4096 "dist/build-$name.log" 2>/dev/null | tr '\r' '\n' |
      sed 's/\x1b\[[0-9;]*[A-Za-z]//g; s/^[[:space:]]*//' | grep -v '^$' | tail -1 | cut -c1-120)
    printf '=== build %s: running for %dm%02ds: %s\n' "$name" $(((now - start) / 60)) \
      $(((now - start) % 60)) "${stage:-starting}" >&2
  done
  return $any
}
rm -f dist/build-*.rc dist/build-*.log dist/build-*.start
# Each build runs in a process group of its own, so that stop_services can end it with its children.
set -m
# The Go chain, one build after the other (they share Go's build cache; kube_real and real_node
# take one lock): what the real kube-apiserver tier, the real node, the engine tiers' S3 server,
# the conformance tier and the soak test need.
if [ "${SKIP_KUBE_REAL:-}" != "1" ]; then
  (
    build kube-real tests/testbed/services/kube_real/build.sh
    if [ "$(id -u)" -eq 0 ] && [ "$(cat dist/build-kube-real.rc)" = 0 ]; then
      build real-node tests/testbed/services/real_node/build.sh
    fi
    build versitygw tests/testbed/services/versitygw/build.sh
    build csi-sanity tests/testbed/services/csi_sanity/build.sh
    build kubelet-client tests/adversarial/kubelet_client/build.sh
  ) &
  GO_BUILD_PID=$!
else
  service_unavailable kube-real "skipped on request (SKIP_KUBE_REAL=1)"
fi
# Our Rust engine, beside the Go chain.
(build engine scripts/build_engine.sh) &
ENGINE_BUILD_PID=$!
# Every 30 s, while a build runs, what each one is doing (between the tiers' own output).
(
  sleep 5
  while build_progress; do sleep 30; done
) &
PROGRESS_PID=$!
set +m
wait_go_chain() {
  [ -n "${GO_BUILD_PID:-}" ] || return 0
  printf '=== builds: waiting for the Go chain (dist/build-*.log)\n' >&2
  build_progress || true
  wait "$GO_BUILD_PID" 2>/dev/null
  GO_BUILD_PID=""
  local n
  for n in versitygw csi-sanity kubelet-client; do build_result "$n" || true; done
  [ "$(id -u)" -eq 0 ] && { build_result real-node || true; }
  start_kube_real
}
wait_engine() {
  [ -n "${ENGINE_BUILD_PID:-}" ] || return 0
  printf '=== builds: waiting for the engine (dist/build-engine.log)\n' >&2
  build_progress || true
  wait "$ENGINE_BUILD_PID" 2>/dev/null
  ENGINE_BUILD_PID=""
  build_result engine || true
}
start_kube_real() {
  build_result kube-real || return 0
  local bin rc=0 kcfg
  bin=$(sed -n 's/^KUBE_REAL_BIN=//p' dist/build-kube-real.log | tail -1)
  if [ -x "$bin/kubectl" ]; then
    export KUBECTL="$bin/kubectl"
    printf '=== kubectl: %s (%s)\n' "$KUBECTL" "$("$KUBECTL" version --client 2>/dev/null | head -1)" >&2
  else
    service_unavailable kubectl "build.sh named no kubectl in '$bin'"
  fi
  kcfg=$(bash tests/testbed/services/kube_real/start.sh 2>dist/kube-real-start.log) || rc=$?
  if [ "$rc" -eq 0 ]; then
    KUBE_REAL_STARTED=1
    export KUBE_REAL_KUBECONFIG="$kcfg"
    printf '=== service kube-real: %s\n' "$kcfg" >&2
  else
    service_unavailable kube-real "start.sh exit $rc: $(tail -1 dist/kube-real-start.log)"
  fi
}

step fmt deno fmt --check
step lint deno lint
step layers deno task layers
step check deno task check
# Unit tests get no permissions, except two env vars the yaml package reads when parsing.
step unit deno test --parallel --allow-env=LOG_TOKENS,LOG_STREAM --junit-path="$REPORTS/unit.xml" "${filter[@]}" src/ tests/testbed/ tests/bench/ scripts/
step gen deno task gen:check

if [ "${SKIP_RGW:-}" = "1" ]; then
  service_unavailable rgw "skipped on request (SKIP_RGW=1)"
elif [ "$(id -u)" -ne 0 ]; then
  service_unavailable rgw "needs root (to install and run Ceph)"
elif env_lines=$(bash tests/testbed/services/s3/rgw_start.sh 2>dist/rgw-start.log); then
  RGW_STARTED=1
  set -a; eval "$env_lines"; set +a
  export S3_ENV_FILE="${S3_STATE_DIR:-/var/tmp/s3csi-rgw}/env"
  printf '=== service rgw: %s\n' "$S3_ENDPOINT" >&2
else
  service_unavailable rgw "rgw_start.sh failed: $(tail -1 dist/rgw-start.log)"
fi
# One deno process per tier folder, so that a crash of the runtime in one tier (seen: an nghttp2
# assertion in Deno's HTTP/2 client) cannot take the other tiers' results with it. Order, so that
# the cold builds overlap the tiers: those that need none of the builds; those that need the Go
# chain (the real kube-apiserver, kubectl, csi-sanity, the grpc-go client); the rest (our engine
# and versitygw — and any new tier, which so waits for every build); the real-node tier last.
reports=("$REPORTS/unit.xml")
first=() go=() rest=() last=()
# shellcheck disable=SC2086
for tier in ${TEST_PATHS:-tests/*/}; do
  name=$(basename "$tier")
  # testbed: shared code, not a tier; bench: the benchmarks (deno task bench). Their unit tests
  # ran with the unit step.
  [ "$name" = testbed ] || [ "$name" = bench ] && continue
  [ -n "$(find "$tier" -name '*_test.ts' -print -quit)" ] || continue
  case "$name" in
  cli | csi | kubelet | mounter | node | provisioning | sys) first+=("$tier") ;;
  adversarial | apiserver | conformance | controller | deploy | e2e | kube_contract) go+=("$tier") ;;
  real_node) last+=("$tier") ;;
  *) rest+=("$tier") ;;
  esac
done
run_tier() {
  local tier="$1" name
  name=$(basename "$tier")
  reports+=("$REPORTS/integration-$name.xml")
  step "integration:$name" deno test -A --junit-path="$REPORTS/integration-$name.xml" "${filter[@]}" "$tier"
}
for tier in "${first[@]}"; do run_tier "$tier"; done
wait_go_chain
for tier in "${go[@]}"; do run_tier "$tier"; done
wait_engine
for tier in "${rest[@]}"; do run_tier "$tier"; done
for tier in "${last[@]}"; do
  REAL_NODE_TIER_RAN=1
  run_tier "$tier"
done
# Without TEST_PATHS every build is waited for (its failure is reported even if no tier needed it).
wait_go_chain
wait_engine

stop_services
step leftovers deno run -A scripts/leftovers.ts check "$REPORTS/leftovers-before.json"

summary_rc=0
summary=$(deno run --allow-read=dist scripts/junit_summary.ts "${reports[@]}") || summary_rc=$?
[ "$summary_rc" -ne 0 ] && failed_steps+=("tests")
skips=$(printf '%s\n' "$summary" | sed -n 's/^skipped (\([0-9]*\)):$/\1/p')
echo
if [ "${#unavailable[@]}" -gt 0 ]; then
  echo "UNAVAILABLE SERVICES (the tests that need them are skipped):"
  printf '  - %s\n' "${unavailable[@]}"
fi
if [ -n "$skips" ] && [ "$CI_STRICT" = 1 ]; then
  failed_steps+=("skipped-tests")
  echo "CI=true: ${skips} skipped test(s) fail the run (listed below)."
elif [ -n "$skips" ]; then
  echo "WARNING: ${skips} test(s) skipped (listed below); under CI=true this run would fail."
fi
echo "steps failed: ${#failed_steps[@]}${failed_steps[*]:+ (${failed_steps[*]})}"
echo "$summary"
[ "${#failed_steps[@]}" -eq 0 ]
