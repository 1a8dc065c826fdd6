#!/usr/bin/env bash
# Build csi-sanity (github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity) from a Go module pinned
# here (v<version>/go.mod + go.sum), once, into a cache outside the repository keyed by the
# csi-test version. Takes the newest pinned version the local Go can build: v5.6.0 needs Go >= 1.25,
# v5.4.0 Go >= 1.23 (Debian 13's Go 1.24, bookworm-backports). Skips the build when the cached
# binary matches the module files and the toolchain.
#
# Usage: tests/testbed/services/csi_sanity/build.sh
#   stdout (last line): CSI_SANITY_BIN=<path of the csi-sanity binary>
#   exit 0 ok | 1 build failed | 3 cannot build on this machine (callers skip)
#
# Env: CSI_SANITY_CACHE          cache root (default /var/cache/s3csi-csi-sanity)
#      CSI_SANITY_GO             go binary (default: go on PATH, then /usr/local/go/bin/go)
#      CSI_SANITY_VERSION        build this pinned version only (e.g. v5.4.0)
#      CSI_SANITY_BUILD_TIMEOUT  seconds for module download + build (default 1200)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CSI_SANITY_CACHE:-/var/cache/s3csi-csi-sanity}"
TIMEOUT="${CSI_SANITY_BUILD_TIMEOUT:-1200}"
PKG="github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"

log() { printf 'csi_sanity: %s\n' "$*" >&2; }
die() { # die CODE MESSAGE...
  local code="$1"
  shift
  printf 'csi_sanity: ERROR: %s\n' "$*" >&2
  exit "$code"
}
skip() {
  printf 'csi_sanity: SKIP: %s\n' "$*" >&2
  exit 3
}

export GOTOOLCHAIN=local # never download another toolchain
# shellcheck source=../go_lib.sh
. "$HERE/../go_lib.sh"
find_go() { svc_find_go "${CSI_SANITY_GO:-}"; }
version_ge() { # version_ge HAVE WANT: both like 1.25.0 / 1.26.8
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]
}

# Pinned versions, newest first, and the Go each needs (the go directive of its go.mod).
mapfile -t PINNED < <(cd "$HERE" && ls -d v*/ | tr -d / | sort -rV)
[ "${#PINNED[@]}" -gt 0 ] || die 1 "no pinned csi-test module under $HERE"
if [ -n "${CSI_SANITY_VERSION:-}" ]; then
  [ -f "$HERE/$CSI_SANITY_VERSION/go.mod" ] || die 1 "CSI_SANITY_VERSION=$CSI_SANITY_VERSION is not pinned under $HERE"
  PINNED=("$CSI_SANITY_VERSION")
fi
go_wanted() { awk '$1 == "go" { print $2; exit }' "$HERE/$1/go.mod"; }
stamp_of() { cat "$HERE/$1/go.mod" "$HERE/$1/go.sum" | sha256sum | cut -d' ' -f1; }

GO_PROBLEM=""
if GO="$(find_go)"; then
  GO_VERSION="$("$GO" env GOVERSION 2>/dev/null || true)"
else
  GO_PROBLEM="no Go toolchain (go not on PATH, no /usr/local/go/bin/go, CSI_SANITY_GO='${CSI_SANITY_GO:-}')"
fi
VERSION=""
if [ -z "$GO_PROBLEM" ]; then
  for v in "${PINNED[@]}"; do
    if version_ge "${GO_VERSION#go}" "$(go_wanted "$v")"; then
      VERSION="$v"
      break
    fi
  done
  if [ -z "$VERSION" ]; then
    needs="$(for v in "${PINNED[@]}"; do printf '%s needs Go >= %s; ' "$v" "$(go_wanted "$v")"; done)"
    GO_PROBLEM="${needs}found '${GO_VERSION:-none}' at $GO"
  fi
fi

if [ -n "$GO_PROBLEM" ]; then
  # Without a usable Go, a cached binary built from the same module files is still good.
  for v in "${PINNED[@]}"; do
    bin="$CACHE/$v/bin/csi-sanity"
    if [ -x "$bin" ] && [ "$(cut -d' ' -f1 "$CACHE/$v/stamp" 2>/dev/null || true)" = "$(stamp_of "$v")" ]; then
      log "$GO_PROBLEM; using the cached $bin"
      echo "CSI_SANITY_BIN=$bin"
      exit 0
    fi
  done
  skip "$GO_PROBLEM"
fi

GOMOD_DIR="$HERE/$VERSION"
VERDIR="$CACHE/$VERSION"
BIN="$VERDIR/bin/csi-sanity"
STAMP_WANT="$(stamp_of "$VERSION")"
STAMP_WANT="$STAMP_WANT $GO_VERSION"

mkdir -p "$VERDIR" 2>/dev/null || skip "cannot create cache dir $VERDIR (set CSI_SANITY_CACHE)"
[ -w "$VERDIR" ] || skip "cache dir $VERDIR is not writable (set CSI_SANITY_CACHE)"
# One build at a time per cache (parallel test files may all call us).
exec 9>"$VERDIR/.lock"
flock -w "$TIMEOUT" 9 || die 1 "timed out waiting for another build holding $VERDIR/.lock"

if [ -x "$BIN" ] && [ "$(cat "$VERDIR/stamp" 2>/dev/null || true)" = "$STAMP_WANT" ]; then
  log "csi-sanity $VERSION already built: $BIN"
  echo "CSI_SANITY_BIN=$BIN"
  exit 0
fi

rm -f "$VERDIR/stamp"
tmp="$(mktemp -d "$VERDIR/.build.XXXXXX")"
# The only recursive removal here: our own mktemp dir, checked by name, never through a symlink
# or into another file system.
remove_tmp() {
  case "$tmp" in
  "$VERDIR"/.build.??????)
    if [ -d "$tmp" ] && [ ! -L "$tmp" ]; then rm -rf --one-file-system -- "$tmp"; fi
    ;;
  *) log "not removing unexpected build dir '$tmp'" ;;
  esac
}
trap remove_tmp EXIT
t0=$(date +%s)
log "building csi-sanity $VERSION with $GO_VERSION (timeout ${TIMEOUT}s; about a minute on 2 cores)"
out="$(
  cd "$GOMOD_DIR" &&
    CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
      timeout "$TIMEOUT" "$GO" build -ldflags "-s -w -X main.VERSION=$VERSION" -o "$tmp/" "$PKG" 2>&1
)" || {
  rc=$?
  printf '%s\n' "$out" | tail -n 15 >&2
  [ "$rc" -eq 124 ] && die 1 "go build timed out after ${TIMEOUT}s"
  case "$out" in
  *"missing go.sum entry"* | *"checksum mismatch"* | *"SECURITY ERROR"* | *"updates to go.mod needed"*)
    die 1 "$GOMOD_DIR/go.mod or go.sum is inconsistent" ;;
  *"dial tcp"* | *"no such host"* | *"proxy.golang.org"* | *"i/o timeout"* | *"connection refused"*)
    skip "cannot download Go modules (module proxy unreachable?)" ;;
  esac
  die 1 "go build failed (exit $rc)"
}
mkdir -p "$VERDIR/bin"
mv -f "$tmp/csi-sanity" "$BIN"
echo "$STAMP_WANT" >"$VERDIR/stamp"
log "built $BIN in $(($(date +%s) - t0))s ($("$BIN" -version))"
echo "CSI_SANITY_BIN=$BIN"
