#!/usr/bin/env bash
# `deno task test`: every test tier this machine supports, in order, with one summary at the end.
#   1. ok        fmt check, lint, type check, unit tests (no permissions)
#   2. gen       generated files match their generators
#   3. tests/    integration tiers (real processes, FUSE, S3, API servers); a tier whose
#                prerequisites are missing skips with a printed reason. The binaries of the real
#                kube-apiserver and real-node tiers build in the background from the start; the
#                tiers that need neither run first, then those of the real kube-apiserver, then
#                the real-node tier (tests/real_node/).
# Ends with a line "N passed, N failed, N skipped" counted from the JUnit reports.
# Set TEST_FILTER to pass --filter to deno test; TEST_PATHS to run only some paths of tests/;
# KEEP_SERVICES=1 leaves RGW and the real API server running; SKIP_RGW=1 / SKIP_KUBE_REAL=1 skip them;
# SKIP_REAL_NODE=1 skips building the real-node tier's binaries (its tests then skip or fail).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REPORTS="$PWD/dist/test-reports"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
failed_steps=()

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

# Services the integration tiers use. Tests that need one skip with a printed reason when it is
# absent; in CI (CI=true) a service that cannot start fails the run.
cleanup() {
  [ "${KEEP_SERVICES:-}" = "1" ] && return 0
  [ -n "${RGW_STARTED:-}" ] && bash tests/testbed/services/s3/rgw_stop.sh >/dev/null 2>&1
  [ -n "${KUBE_REAL_STARTED:-}" ] && bash tests/testbed/services/kube_real/stop.sh >/dev/null 2>&1
  [ -n "${KUBE_REAL_BUILD_PID:-}" ] && kill "$KUBE_REAL_BUILD_PID" 2>/dev/null
  [ -n "${REAL_NODE_BUILD_PID:-}" ] && kill "$REAL_NODE_BUILD_PID" 2>/dev/null
  # The real-node tier stops its node itself; if it died before that, stop it here.
  [ -n "${REAL_NODE_TIER_RAN:-}" ] && [ -s "${REAL_NODE_STATE:-/var/tmp/s3csi-real-node}/kubelet.pid" ] &&
    bash tests/testbed/services/real_node/stop.sh >dist/real-node-stop.log 2>&1
  return 0
}
trap cleanup EXIT
service_failed() {
  printf '=== service %s unavailable: %s\n' "$1" "$2" >&2
  if [ "${CI:-}" = "true" ]; then failed_steps+=("service-$1"); fi
}
# The real kube-apiserver tier builds from Go modules (minutes on a new machine): start it now.
if [ "${SKIP_KUBE_REAL:-}" != "1" ]; then
  bash tests/testbed/services/kube_real/build.sh > dist/kube-real-build.log 2>&1 &
  KUBE_REAL_BUILD_PID=$!
fi
# The real-node tier adds kube-scheduler, kubelet, kube-proxy, kubectl and the sidecar stand-ins
# (~3 min cold, after the build above: both take the cache's lock): start it now too, so that the
# whole cold build (~15 min on 2 cores) overlaps the other tiers. Cached outside the repository.
if [ "${SKIP_REAL_NODE:-}" != "1" ] && [ "$(id -u)" -eq 0 ]; then
  bash tests/testbed/services/real_node/build.sh > dist/real-node-build.log 2>&1 &
  REAL_NODE_BUILD_PID=$!
fi

step fmt deno fmt --check
step lint deno lint
step layers deno task layers
step check deno task check
# Unit tests get no permissions, except two env vars the yaml package reads when parsing.
step unit deno test --parallel --allow-env=LOG_TOKENS,LOG_STREAM --junit-path="$REPORTS/unit.xml" "${filter[@]}" src/ tests/testbed/ scripts/
step gen deno task gen:check

if [ "$(id -u)" -eq 0 ] && [ "${SKIP_RGW:-}" != "1" ]; then
  if env_lines=$(bash tests/testbed/services/s3/rgw_start.sh 2>dist/rgw-start.log); then
    RGW_STARTED=1
    set -a; eval "$env_lines"; set +a
    export S3_ENV_FILE="${S3_STATE_DIR:-/var/tmp/s3csi-rgw}/env"
    printf '=== service rgw: %s\n' "$S3_ENDPOINT" >&2
  else
    service_failed rgw "$(tail -1 dist/rgw-start.log)"
  fi
else
  printf '=== service rgw: skipped (needs root; SKIP_RGW=%s)\n' "${SKIP_RGW:-}" >&2
fi
# The real kube-apiserver tier: its cold build (~12 min on a new machine) overlaps the tiers that
# do not need it, which run first; it is started just before the first tier that does.
start_kube_real() {
  [ -n "${KUBE_REAL_BUILD_PID:-}" ] || return 0
  printf '=== kube-real build: waiting for it (log dist/kube-real-build.log)\n' >&2
  local rc=0 kcfg
  wait "$KUBE_REAL_BUILD_PID" || rc=$?
  KUBE_REAL_BUILD_PID=""
  if [ "$rc" -eq 0 ]; then
    rc=0; kcfg=$(bash tests/testbed/services/kube_real/start.sh 2>dist/kube-real-start.log) || rc=$?
    if [ "$rc" -eq 0 ]; then
      KUBE_REAL_STARTED=1
      export KUBE_REAL_KUBECONFIG="$kcfg"
      printf '=== service kube-real: %s\n' "$kcfg" >&2
    else
      service_failed kube-real "start.sh exit $rc: $(tail -1 dist/kube-real-start.log)"
    fi
  elif [ "$rc" -eq 3 ]; then
    service_failed kube-real "cannot build here: $(tail -1 dist/kube-real-build.log)"
  else
    service_failed kube-real "build failed (exit $rc): $(tail -1 dist/kube-real-build.log)"
  fi
}
# The real-node tier needs its binaries (kube-scheduler, kubelet, kube-proxy, kubectl, stand-ins).
wait_real_node_build() {
  [ -n "${REAL_NODE_BUILD_PID:-}" ] || return 0
  printf '=== real-node build: waiting for it (log dist/real-node-build.log)\n' >&2
  local rc=0
  wait "$REAL_NODE_BUILD_PID" || rc=$?
  REAL_NODE_BUILD_PID=""
  if [ "$rc" -eq 3 ]; then
    service_failed real-node "cannot build here: $(tail -1 dist/real-node-build.log)"
  elif [ "$rc" -ne 0 ]; then
    service_failed real-node "build failed (exit $rc): $(tail -1 dist/real-node-build.log)"
  fi
}

# One deno process per tier folder, so that a crash of the runtime in one tier (seen: an nghttp2
# assertion in Deno's HTTP/2 client) cannot take the other tiers' results with it. Order: the tiers
# that need no service being built, then those that use the real kube-apiserver (they read
# KUBE_REAL_KUBECONFIG), then the real-node tier, whose binaries build longest.
reports=("$REPORTS/unit.xml")
first=() kube=() last=()
# shellcheck disable=SC2086
for tier in ${TEST_PATHS:-tests/*/}; do
  name=$(basename "$tier")
  [ "$name" = testbed ] && continue # its unit tests ran with the unit step
  [ -n "$(find "$tier" -name '*_test.ts' -print -quit)" ] || continue
  if [ "$name" = real_node ]; then
    last+=("$tier")
  elif grep -rqs --include='*.ts' KUBE_REAL_KUBECONFIG "$tier"; then
    kube+=("$tier")
  else
    first+=("$tier")
  fi
done
run_tier() {
  local tier="$1" name
  name=$(basename "$tier")
  reports+=("$REPORTS/integration-$name.xml")
  step "integration:$name" deno test -A --junit-path="$REPORTS/integration-$name.xml" "${filter[@]}" "$tier"
}
for tier in "${first[@]}"; do run_tier "$tier"; done
[ "${#kube[@]}" -gt 0 ] && start_kube_real
for tier in "${kube[@]}"; do run_tier "$tier"; done
for tier in "${last[@]}"; do
  REAL_NODE_TIER_RAN=1
  wait_real_node_build
  run_tier "$tier"
done

summary=$(deno run --allow-read=dist scripts/junit_summary.ts "${reports[@]}")
echo
echo "steps failed: ${#failed_steps[@]}${failed_steps[*]:+ (${failed_steps[*]})}"
echo "$summary"
[ "${#failed_steps[@]}" -eq 0 ]
