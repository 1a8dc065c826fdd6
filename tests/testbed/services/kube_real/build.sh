#!/usr/bin/env bash
# Build the test-tier Kubernetes control plane once into a cache outside the
# repo: kube-apiserver and kube-controller-manager from k8s.io/kubernetes (the
# Go module in tests/testbed/services/kube_real/go), kubectl from k8s.io/kubectl
# at the same release (the kubectl every test uses), plus etcd (built from
# go.etcd.io/etcd/server/v3 at the version k8s.io/kubernetes pins, or Debian's
# etcd-server). Skips work that is already done.
#
# Usage: tests/testbed/services/kube_real/build.sh [--node]
#   --node  also build kube-scheduler, kubelet and kube-proxy (the real-node
#           tier, tests/testbed/services/real_node)
#   stdout (last line): KUBE_REAL_BIN=<dir holding kube-apiserver,
#                       kube-controller-manager, kubectl, etcd [, the --node binaries]>
#   exit 0 ok | 1 build failed | 3 cannot work on this machine (skip)
#
# Env: KUBE_REAL_CACHE (default /var/cache/s3csi-kube-real)
#      KUBE_REAL_ETCD  auto (default: Go build, Debian etcd-server as fallback)
#                      | go | apt | /path/to/etcd
#      KUBE_REAL_GO    path of the go binary (default: go on PATH, /usr/local/go/bin/go)
#      KUBE_REAL_BUILD_TIMEOUT seconds for the Go build (default 3600)
#      KUBE_REAL_FETCH_TIMEOUT seconds for module downloads (default 1200)
set -euo pipefail
NODE=0
case "${1:-}" in
"") ;;
--node) NODE=1 ;;
*) echo "usage: $0 [--node]" >&2 && exit 2 ;;
esac
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -n "$KR_KUBE_VERSION" ] || kr_die 1 "cannot read k8s.io/kubernetes version from $KR_GOMOD_DIR/go.mod"
[ "$(uname -s)" = Linux ] || kr_skip "only Linux is supported (got $(uname -s))"

export GOTOOLCHAIN=local # never try to download another toolchain
GO_PROBLEM=""
if GO="$(kr_find_go)"; then
  GO_VERSION="$("$GO" env GOVERSION 2>/dev/null || true)"
  case "$GO_VERSION" in
  go1.2[3-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
  *) GO_PROBLEM="Go >= 1.23 needed to build k8s.io/kubernetes $KR_KUBE_VERSION (found '${GO_VERSION:-none}' at $GO)" ;;
  esac
else
  GO_PROBLEM="no Go toolchain (go not on PATH, no /usr/local/go/bin/go, KUBE_REAL_GO='${KUBE_REAL_GO:-}')"
fi
if [ -n "$GO_PROBLEM" ]; then
  # Without Go, binaries already in the cache are still good enough.
  if [ -x "$KR_BIN/kube-apiserver" ] && [ -x "$KR_BIN/kube-controller-manager" ] && [ -x "$KR_BIN/etcd" ] &&
    [ -x "$KR_BIN/kubectl" ] && { [ "$NODE" -eq 0 ] || { [ -x "$KR_BIN/kubelet" ] &&
      [ -x "$KR_BIN/kube-scheduler" ] && [ -x "$KR_BIN/kube-proxy" ]; }; }; then
    kr_log "$GO_PROBLEM; using the cached binaries in $KR_BIN unchecked"
    echo "KUBE_REAL_BIN=$KR_BIN"
    exit 0
  fi
  kr_skip "$GO_PROBLEM"
fi

FETCH_TIMEOUT="${KUBE_REAL_FETCH_TIMEOUT:-1200}"
BUILD_TIMEOUT="${KUBE_REAL_BUILD_TIMEOUT:-3600}"
ETCD_MODE="${KUBE_REAL_ETCD:-auto}"
VERDIR="$KR_CACHE/$KR_KUBE_VERSION"
mkdir -p "$VERDIR" 2>/dev/null || kr_skip "cannot create cache dir $VERDIR (set KUBE_REAL_CACHE)"
[ -w "$VERDIR" ] || kr_skip "cache dir $VERDIR is not writable (set KUBE_REAL_CACHE)"

# One build at a time per cache (parallel test runners may all call us).
exec 9>"$VERDIR/.lock"
if ! flock -w "$BUILD_TIMEOUT" 9; then
  kr_die 1 "timed out waiting for another build holding $VERDIR/.lock"
fi

KMAJOR="${KR_KUBE_VERSION#v}"
KMINOR="${KMAJOR#*.}"
KMINOR="${KMINOR%%.*}"
KMAJOR="${KMAJOR%%.*}"
# Stamp the version so /version answers like a release build (kubectl's
# dispatcher picks its minor version from it) instead of v0.0.0-master.
VPKGS="k8s.io/component-base/version k8s.io/client-go/pkg/version"
LDFLAGS="-s -w"
for p in $VPKGS; do
  # gitCommit: the module proxy does not record it; empty beats "$Format:%H$".
  LDFLAGS="$LDFLAGS -X $p.gitVersion=$KR_KUBE_VERSION -X $p.gitMajor=$KMAJOR -X $p.gitMinor=$KMINOR -X $p.gitTreeState=clean -X $p.gitCommit="
done

# Rebuild when the module, the wrappers, the toolchain or the flags change.
STAMP_WANT="$(
  cd "$KR_GOMOD_DIR"
  {
    cat go.mod go.sum
    find cmd -name '*.go' | LC_ALL=C sort | xargs cat
    echo "$GO_VERSION $LDFLAGS"
  } | sha256sum | cut -d' ' -f1
)"

go_fetch() { # download the modules the wrappers need (not the whole graph)
  local out rc=0
  kr_log "resolving Go modules for $* (timeout ${FETCH_TIMEOUT}s)"
  out="$(cd "$KR_GOMOD_DIR" && GOFLAGS=-mod=readonly timeout "$FETCH_TIMEOUT" "$GO" list -deps "$@" 2>&1 >/dev/null)" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  printf '%s\n' "$out" | tail -n 15 >&2
  if [ "$rc" -eq 124 ]; then
    kr_skip "module download timed out after ${FETCH_TIMEOUT}s (no module proxy reachable?)"
  fi
  case "$out" in
  *"missing go.sum entry"* | *"checksum mismatch"* | *"SECURITY ERROR"* | *"updates to go.mod needed"*)
    kr_die 1 "tests/testbed/services/kube_real/go/go.mod or go.sum is inconsistent" ;;
  esac
  kr_skip "cannot download Go modules (network / module proxy unavailable?)"
}

go_build() { # go_build OUTDIR PKG...
  local out="$1" tmp rc=0 t0
  shift
  tmp="$(mktemp -d "$VERDIR/.build.XXXXXX")"
  t0=$(date +%s)
  # buildDate = the k8s.io/kubernetes release time, so rebuilds are reproducible.
  local bdate ldf="$LDFLAGS" p
  bdate="$("$GO" -C "$KR_GOMOD_DIR" list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes 2>/dev/null)" || bdate=""
  [ -n "$bdate" ] || bdate="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for p in $VPKGS; do ldf="$ldf -X $p.buildDate=$bdate"; done
  kr_log "building $* with $GO_VERSION (timeout ${BUILD_TIMEOUT}s; kube-apiserver + kube-controller-manager take ~7-10 min cold on 2 cores)"
  (
    cd "$KR_GOMOD_DIR"
    CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
      timeout "$BUILD_TIMEOUT" "$GO" build -ldflags "$ldf" -o "$tmp/" "$@"
  ) || rc=$?
  if [ "$rc" -ne 0 ]; then
    rm -rf "$tmp"
    [ "$rc" -eq 124 ] && kr_die 1 "go build timed out after ${BUILD_TIMEOUT}s"
    kr_die 1 "go build failed (exit $rc)"
  fi
  mkdir -p "$out"
  for f in "$tmp"/*; do mv -f "$f" "$out/"; done
  rm -rf "$tmp"
  kr_log "built $* in $(($(date +%s) - t0))s"
}

# ---- kube-apiserver + kube-controller-manager + kubectl ----------------------
if [ -x "$KR_BIN/kube-apiserver" ] && [ -x "$KR_BIN/kube-controller-manager" ] &&
  [ -x "$KR_BIN/kubectl" ] && [ "$(cat "$VERDIR/stamp" 2>/dev/null || true)" = "$STAMP_WANT" ]; then
  kr_log "kube-apiserver, kube-controller-manager, kubectl $KR_KUBE_VERSION already built in $KR_BIN"
else
  rm -f "$VERDIR/stamp"
  go_fetch ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kubectl ./cmd/etcd
  go_build "$KR_BIN" ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kubectl
  echo "$STAMP_WANT" >"$VERDIR/stamp"
fi

# ---- etcd --------------------------------------------------------------------
etcd_version() { "$1" --version 2>/dev/null | awk '/^etcd Version:/ { print $3; exit }'; }
etcd_ok() { # usable etcd: >= 3.4 (3.5 is what Kubernetes 1.32 is tested with)
  local v
  v="$(etcd_version "$1")"
  case "$v" in 3.[5-9]* | 3.[1-9][0-9]* | [4-9].*) return 0 ;; 3.4.*)
    kr_log "warning: etcd $v at $1 is older than the 3.5.x Kubernetes 1.32 is tested with"
    return 0
    ;;
  esac
  kr_log "etcd at $1 is version '${v:-unknown}', need >= 3.4"
  return 1
}
etcd_from_apt() {
  # Debian's etcd-server, unpacked into the cache (apt-get download + dpkg-deb -x):
  # no root needed, and no etcd system service gets started by a postinst.
  local cand deb dir
  command -v apt-get >/dev/null 2>&1 || return 1
  cand="$(apt-cache policy etcd-server 2>/dev/null | awk '/Candidate:/ { print $2 }')"
  if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
    kr_log "Debian package etcd-server not available (run apt-get update?)"
    return 1
  fi
  case "$cand" in 3.[4-9]* | 3.[1-9][0-9]* | [4-9].*) ;; *)
    kr_log "Debian etcd-server is $cand, need >= 3.4"
    return 1
    ;;
  esac
  dir="$VERDIR/etcd-apt-$cand"
  if [ ! -x "$dir/usr/bin/etcd" ]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    (cd "$dir.tmp" && timeout "$FETCH_TIMEOUT" apt-get -q -o APT::Sandbox::User=root download "etcd-server=$cand" >&2) || {
      rm -rf "$dir.tmp"
      return 1
    }
    deb="$(ls "$dir.tmp"/etcd-server_*.deb)"
    dpkg-deb -x "$deb" "$dir.tmp/root" && rm -rf "$dir" && mv "$dir.tmp/root" "$dir" && rm -rf "$dir.tmp"
  fi
  etcd_ok "$dir/usr/bin/etcd" || return 1
  ln -sfn "$dir/usr/bin/etcd" "$KR_BIN/etcd"
  kr_log "etcd: Debian etcd-server $cand"
}
etcd_from_go() {
  local v
  if [ -x "$KR_BIN/etcd" ] && [ ! -L "$KR_BIN/etcd" ] &&
    [ "$(cat "$VERDIR/etcd.stamp" 2>/dev/null || true)" = "$STAMP_WANT" ]; then
    kr_log "etcd already built in $KR_BIN"
    return 0
  fi
  rm -f "$VERDIR/etcd.stamp" "$KR_BIN/etcd"
  go_fetch ./cmd/etcd
  go_build "$KR_BIN" ./cmd/etcd
  echo "$STAMP_WANT" >"$VERDIR/etcd.stamp"
  v="$(cd "$KR_GOMOD_DIR" && "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
  kr_log "etcd: built from go.etcd.io/etcd/server/v3 $v"
}

case "$ETCD_MODE" in
go) etcd_from_go ;;
apt) etcd_from_apt || kr_die 1 "KUBE_REAL_ETCD=apt but Debian etcd-server (>= 3.4) is not usable" ;;
auto)
  # The pinned Go module first: the same etcd (3.5.x, as Kubernetes 1.32 is
  # tested with) on every Debian release, ~15 s on top of the apiserver build.
  # Debian's etcd-server only as a fallback: bookworm ships 3.4.23, and other
  # releases may ship another version or none.
  if [ -x "$KR_BIN/etcd" ] && [ ! -L "$KR_BIN/etcd" ] &&
    [ "$(cat "$VERDIR/etcd.stamp" 2>/dev/null || true)" = "$STAMP_WANT" ]; then
    kr_log "etcd $(etcd_version "$KR_BIN/etcd") already built in $KR_BIN"
  elif ! (etcd_from_go); then
    kr_log "building etcd from Go failed; trying Debian's etcd-server"
    etcd_from_apt || kr_die 1 "no etcd: Go build failed and Debian etcd-server is not usable"
  fi
  ;;
/*)
  etcd_ok "$ETCD_MODE" || kr_die 1 "KUBE_REAL_ETCD=$ETCD_MODE is not a usable etcd"
  ln -sfn "$ETCD_MODE" "$KR_BIN/etcd"
  ;;
*) kr_die 1 "KUBE_REAL_ETCD must be auto, go, apt or an absolute path (got '$ETCD_MODE')" ;;
esac

# ---- kube-scheduler, kubelet, kube-proxy (--node) -------------------------------
NODE_BINS=(kube-scheduler kubelet kube-proxy)
if [ "$NODE" -eq 1 ]; then
  node_built=1
  for b in "${NODE_BINS[@]}"; do [ -x "$KR_BIN/$b" ] || node_built=0; done
  if [ "$node_built" -eq 1 ] && [ "$(cat "$VERDIR/node.stamp" 2>/dev/null || true)" = "$STAMP_WANT" ]; then
    kr_log "${NODE_BINS[*]} $KR_KUBE_VERSION already built in $KR_BIN"
  else
    rm -f "$VERDIR/node.stamp"
    go_fetch "${NODE_BINS[@]/#/./cmd/}"
    go_build "$KR_BIN" "${NODE_BINS[@]/#/./cmd/}"
    echo "$STAMP_WANT" >"$VERDIR/node.stamp"
  fi
fi

WANT_BINS=(kube-apiserver kube-controller-manager kubectl etcd)
[ "$NODE" -eq 0 ] || WANT_BINS+=("${NODE_BINS[@]}")
for b in "${WANT_BINS[@]}"; do
  [ -x "$KR_BIN/$b" ] || kr_die 1 "missing $KR_BIN/$b after build"
done
kr_log "binaries: $KR_BIN ($("$KR_BIN/kube-apiserver" --version 2>/dev/null), etcd $(etcd_version "$KR_BIN/etcd"))"
echo "KUBE_REAL_BIN=$KR_BIN"
