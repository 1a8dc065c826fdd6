#!/usr/bin/env bash
# Build versitygw once into a cache outside the repository, from the Go module proxy.
#
# Usage: tests/testbed/services/versitygw/build.sh
#   stdout (last line): VGW_BIN=<cache>/<version>/bin/versitygw
#   exit 0 ok | 1 build failed | 3 cannot build here (no Go >= 1.25, no cache dir)
#
# Env: VGW_CACHE (default /var/cache/s3csi-versitygw), VGW_VERSION (default v1.8.0),
#      VGW_GO (go binary; default go on PATH or /usr/local/go/bin/go),
#      VGW_BUILD_TIMEOUT seconds (default 900; ~1-2 min cold on 2 cores)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ -x "$VGW_BIN" ]; then
  echo "VGW_BIN=$VGW_BIN"
  exit 0
fi
export GOTOOLCHAIN=local # never download another toolchain
GO="$(vgw_find_go)" || vgw_skip "no Go toolchain (go not on PATH, no /usr/local/go/bin/go, VGW_GO='${VGW_GO:-}')"
GO_VERSION="$("$GO" env GOVERSION 2>/dev/null || true)"
case "$GO_VERSION" in
go1.2[5-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
*) vgw_skip "Go >= 1.25 needed to build $VGW_MODULE $VGW_VERSION (found '${GO_VERSION:-none}' at $GO)" ;;
esac
TIMEOUT="${VGW_BUILD_TIMEOUT:-900}"
dir="$(dirname "$VGW_BIN")"
mkdir -p "$dir" 2>/dev/null || vgw_skip "cannot create $dir (set VGW_CACHE)"
exec 9>"$VGW_CACHE/.lock"
flock -w "$TIMEOUT" 9 || vgw_die "timed out waiting for another build holding $VGW_CACHE/.lock"
if [ -x "$VGW_BIN" ]; then
  echo "VGW_BIN=$VGW_BIN"
  exit 0
fi
vgw_log "building $VGW_MODULE $VGW_VERSION with $GO_VERSION (timeout ${TIMEOUT}s)"
started=$SECONDS
tmp="$(mktemp -d "$VGW_CACHE/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
rc=0
# `go install module@version` uses the module's own go.mod and checks go.sum against the checksum
# database (through the module proxy): the build is pinned by the version.
CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="-trimpath -buildvcs=false" \
  timeout "$TIMEOUT" "$GO" install -ldflags "-s -w" "$VGW_MODULE/cmd/versitygw@$VGW_VERSION" >&2 || rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 124 ] && vgw_die "go install timed out after ${TIMEOUT}s"
  vgw_die "go install $VGW_MODULE/cmd/versitygw@$VGW_VERSION failed (exit $rc)"
fi
mv "$tmp/versitygw" "$VGW_BIN"
vgw_log "built in $((SECONDS - started)) s: $VGW_BIN"
echo "VGW_BIN=$VGW_BIN"
