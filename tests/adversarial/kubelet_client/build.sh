#!/usr/bin/env bash
# Build kubelet-client (tests/adversarial/kubelet_client: grpc-go CSI clients that call like the
# kubelet) from the Go modules pinned in go.mod + go.sum, once, into a cache outside the repository
# keyed by the sources and the toolchain.
#
# Usage: tests/adversarial/kubelet_client/build.sh
#   stdout (last line): KUBELET_CLIENT_BIN=<path>
#   exit 0 ok | 1 build failed | 3 cannot build on this machine (callers skip with the reason)
#
# Env: KUBELET_CLIENT_CACHE   cache root (default /var/cache/s3csi-kubelet-client)
#      KUBELET_CLIENT_GO      go binary (default: go on PATH, then /usr/local/go/bin/go)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${KUBELET_CLIENT_CACHE:-/var/cache/s3csi-kubelet-client}"
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

skip() {
  printf 'kubelet_client: SKIP: %s\n' "$*" >&2
  exit 3
}

if [ -n "${KUBELET_CLIENT_GO:-}" ]; then
  GO="$KUBELET_CLIENT_GO"
elif command -v go >/dev/null 2>&1; then
  GO="$(command -v go)"
elif [ -x /usr/local/go/bin/go ]; then
  GO=/usr/local/go/bin/go
else
  skip "no Go toolchain (go not on PATH, no /usr/local/go/bin/go; scripts/setup.sh installs one)"
fi
GO_WANT="$(awk '$1 == "go" { print $2; exit }' "$HERE/go.mod")"
GO_HAVE="$("$GO" env GOVERSION 2>/dev/null || true)"
GO_HAVE="${GO_HAVE#go}"
if [ "$(printf '%s\n%s\n' "$GO_WANT" "$GO_HAVE" | sort -V | head -1)" != "$GO_WANT" ]; then
  skip "needs Go >= $GO_WANT (found '${GO_HAVE:-none}' at $GO)"
fi

STAMP="$(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE/main.go" | sha256sum | cut -c1-16)-$GO_HAVE"
OUT="$CACHE/$STAMP"
BIN="$OUT/kubelet-client"
if [ -x "$BIN" ]; then
  echo "KUBELET_CLIENT_BIN=$BIN"
  exit 0
fi
mkdir -p "$OUT" 2>/dev/null || skip "cannot create $OUT (set KUBELET_CLIENT_CACHE)"
TMP="$(mktemp -d "$OUT/build.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
printf 'kubelet_client: building with %s (modules from the Go module proxy)\n' "$GO" >&2
if ! (cd "$HERE" && "$GO" build -trimpath -o "$TMP/kubelet-client" .) >&2; then
  echo "kubelet_client: ERROR: go build failed" >&2
  exit 1
fi
mv "$TMP/kubelet-client" "$BIN"
echo "KUBELET_CLIENT_BIN=$BIN"
