#!/usr/bin/env bash
# Build celcheck (go/cmd/celcheck: evaluates a ValidatingAdmissionPolicy's variables with
# Kubernetes' own CEL libraries, no API server) once, from the modules build.sh fetched.
#
# Usage: tests/testbed/services/kube_real/celcheck.sh
#   stdout (last line): CELCHECK_BIN=<cache>/<version>/celcheck-<key>/celcheck
#   exit 0 ok | 1 build failed | 3 cannot work on this machine (no Go, modules not fetched)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export GOTOOLCHAIN=local
GO="$(kr_find_go)" || kr_skip "no Go toolchain (go not on PATH, no /usr/local/go/bin/go)"
KEY="$(cat "$KR_GOMOD_DIR/cmd/celcheck/main.go" "$KR_GOMOD_DIR/go.mod" "$KR_GOMOD_DIR/go.sum" | sha256sum | cut -c1-16)"
OUT="$KR_CACHE/$KR_KUBE_VERSION/celcheck-$KEY"
if [ ! -x "$OUT/celcheck" ]; then
  mkdir -p "$OUT" 2>/dev/null || kr_skip "cannot create $OUT (set KUBE_REAL_CACHE)"
  kr_log "building celcheck (~1 min cold)"
  rc=0
  out="$(cd "$KR_GOMOD_DIR" && CGO_ENABLED=0 GOPROXY=off GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
    timeout 1200 "$GO" build -o "$OUT/celcheck.tmp" ./cmd/celcheck 2>&1)" || rc=$?
  if [ "$rc" -ne 0 ]; then
    printf '%s\n' "$out" | tail -5 >&2
    case "$out" in
    *"module lookup disabled"* | *"cannot find module"* | *"missing go.sum entry"*)
      kr_skip "the Go modules of the real tier are not fetched: run tests/testbed/services/kube_real/build.sh" ;;
    esac
    kr_die 1 "go build ./cmd/celcheck failed (exit $rc)"
  fi
  mv -f "$OUT/celcheck.tmp" "$OUT/celcheck"
fi
echo "CELCHECK_BIN=$OUT/celcheck"
