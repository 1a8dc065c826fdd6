#!/usr/bin/env bash
# Install what building and testing this project needs, idempotently, on Debian 12 or 13 with
# only Node.js/npm (proven by scripts/fresh_debian_check.sh):
#   - Deno 2.9.6 from npm (the only Deno source these machines reach) when missing or different;
#   - when root: the Debian packages the tests and the sandbox use (lists below, by purpose);
#   - when root: Go from Debian when no Go >= GO_WANT is installed: Debian 13 from trixie-backports
#     (golang-go 1.27), Debian 12 from bookworm-backports (golang-go 1.23: enough for Kubernetes
#     1.32, GO_MIN, but not for the soak test's client, which is then skipped — Debian 12 packages
#     no newer Go);
#     Where Debian's Go is older than GO_WANT, the Go toolchain GO_TOOLCHAIN is fetched through the
#     Go module proxy (golang.org/toolchain, as `GOTOOLCHAIN=` does) and linked as /usr/local/bin/go;
#   - when root: the build dependencies of our FUSE engine (src/engine, a Rust crate) and a Rust
#     toolchain new enough for it when Debian has one (Debian 12: cargo-web from bookworm-security);
#   - the npm dependencies pinned by deno.lock;
#   - unless --no-test-binaries: what the tests build, each by its own build script (cached outside
#     the repo): our engine mount-s3 (scripts/build_engine.sh, ~6-12 min cold on 2 cores), the
#     real-tier Kubernetes binaries and kubectl (tests/testbed/services/kube_real/build.sh, ~10 min
#     the first time; the tests use that kubectl, never the machine's), the real node's extra
#     binaries and sidecar stand-ins (tests/testbed/services/real_node/build.sh), versitygw
#     (tests/testbed/services/versitygw/build.sh), csi-sanity
#     (tests/testbed/services/csi_sanity/build.sh) and the soak test's grpc-go client
#     (tests/adversarial/kubelet_client/build.sh). `scripts/dev test` passes --no-test-binaries:
#     scripts/test.sh builds them itself, in the background, beside the first tiers.
# Safe to run again; prints what it does on stderr. Exit 1 when something it must do fails.
set -euo pipefail

DENO_VERSION="2.9.6"
# Go that builds k8s.io/kubernetes v1.32 (its go.mod says go 1.23): needed.
GO_MIN="1.23"
# Go that builds every test binary: the soak test's grpc-go client (tests/adversarial/kubelet_client)
# needs 1.25; csi-sanity builds v5.6.0 with it (v5.4.0 with 1.23). Wanted.
GO_WANT="1.25"
# The toolchain fetched through the Go module proxy when Debian packages no Go >= GO_WANT.
GO_TOOLCHAIN="go1.25.4"
GO_TOOLCHAIN_DIR="/usr/local/lib/s3csi-go"
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages, one list per purpose (add a list for a new purpose; keep each sorted).
# Tools the tests and testbed spawn: FUSE (fusermount3), rclone (the FUSE engine), openssl
# (emulator certificates), util-linux (setpriv, setsid, unshare, flock, mount), procps (pgrep),
# iproute2 (ss), curl (service health checks), coreutils (dd, timeout, sha256sum).
APT_TEST_TOOLS=(ca-certificates coreutils curl fuse3 iproute2 openssl procps rclone util-linux)
# Ceph RGW, the S3 server of the tests and the sandbox (tests/testbed/services/s3/rgw_start.sh).
APT_RGW=(ceph-mon ceph-osd radosgw)
# The real-node tier (tests/testbed/services/real_node): containerd, runc, CNI plugins, iptables and
# nftables, tools the kubelet and kube-proxy call, a static libc for pause.c, busybox for test pods.
APT_REAL_NODE=(busybox-static conntrack containerd containernetworking-plugins ebtables ethtool gcc
  iptables libc6-dev nftables runc socat)
# Build dependencies of src/engine (the Mountpoint crates: libfuse, bindgen's libclang, the CRT's cmake).
APT_ENGINE_BUILD=(cmake gcc libc6-dev libclang-dev libfuse-dev pkg-config)

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
debian_major() { cut -d. -f1 /etc/debian_version 2>/dev/null || echo "?"; }

ensure_deno() {
  if command -v deno >/dev/null 2>&1 && deno --version 2>/dev/null | head -1 | grep -q "^deno ${DENO_VERSION} "; then
    return
  fi
  command -v npm >/dev/null 2>&1 || die "Deno ${DENO_VERSION} is missing and npm is not installed: install Node.js/npm first"
  log "installing Deno ${DENO_VERSION} from npm"
  npm install -g --no-fund --no-audit "deno@${DENO_VERSION}" >&2 || die "npm install -g deno@${DENO_VERSION} failed"
  hash -r
  deno --version | head -1 | grep -q "^deno ${DENO_VERSION} " || die "deno on PATH is not ${DENO_VERSION} after install: $(command -v deno)"
}

# apt_install [-t RELEASE] PACKAGE...: install the missing ones.
APT_UPDATED=""
# apt_update: `apt-get update` once, and again after a source was added.
apt_update() {
  [ -z "$APT_UPDATED" ] || return 0
  apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 || die "apt-get update failed"
  APT_UPDATED=1
}
apt_install() {
  local release=()
  if [ "${1:-}" = "-t" ]; then release=(-t "$2"); shift 2; fi
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  log "installing Debian packages: ${missing[*]}${release:+ from ${release[1]}} (Debian $(cat /etc/debian_version 2>/dev/null || echo '?'))"
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${release[@]}" "${missing[@]}" >&2 ||
    die "apt-get install ${missing[*]} failed"
}

ensure_apt_packages() {
  if ! is_root; then
    log "WARNING: not root: Debian packages not checked (${APT_TEST_TOOLS[*]} ${APT_RGW[*]} ${APT_REAL_NODE[*]}); tests needing them will be skipped"
    return
  fi
  command -v apt-get >/dev/null 2>&1 || die "no apt-get: this script supports Debian 12 and 13"
  apt_install "${APT_TEST_TOOLS[@]}" "${APT_RGW[@]}" "${APT_REAL_NODE[@]}"
}

# go_at_least GO VERSION: true when GO runs and is at least VERSION.
go_at_least() {
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1 # e.g. go1.23.5
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$2" "$v" | sort -V | head -1)" = "$2" ]
}
go_ok() { go_at_least "$1" "$GO_MIN"; }

find_go() {
  local g
  for g in "${KUBE_REAL_GO:-}" "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
    [ -n "$g" ] && [ -x "$g" ] && go_ok "$g" && { echo "$g"; return 0; }
  done
  return 1
}

# apt_mirror: the Debian mirror apt already uses (default deb.debian.org).
apt_mirror() {
  local m
  m="$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 | tr -d ' ' || true)"
  echo "${m:-http://deb.debian.org/debian}"
}

# add_backports SUITE: enable SUITE-backports (pinned low by Debian: only what is asked for comes
# from it) on the mirror apt already uses.
add_backports() {
  local suite="$1" list="/etc/apt/sources.list.d/s3csi-$1-backports.list" mirror
  grep -rqs "$suite-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  mirror="$(apt_mirror)"
  log "adding $suite-backports (${mirror%/}) for Go"
  echo "deb ${mirror%/} $suite-backports main" >"$list"
  APT_UPDATED=""
}

# add_security_suite: enable <release>-security (where Debian 12 ships cargo-web) on the mirror
# apt already uses, when no source names it.
add_security_suite() {
  local suite list mirror base
  case "$(debian_major)" in
  12) suite=bookworm ;;
  13) suite=trixie ;;
  *) return 0 ;;
  esac
  grep -rqs -- "$suite-security" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  mirror="$(apt_mirror)"
  base="${mirror%/}"
  base="${base%/debian}/debian-security"
  list="/etc/apt/sources.list.d/s3csi-$suite-security.list"
  log "adding $suite-security ($base) for the Rust toolchain (cargo-web)"
  echo "deb $base $suite-security main" >"$list"
  APT_UPDATED=""
}

ensure_go() {
  local g
  if g="$(find_go)" && go_at_least "$g" "$GO_WANT"; then
    log "Go: $("$g" env GOVERSION) at $g"
    return
  fi
  if ! is_root; then
    log "WARNING: no Go >= ${GO_WANT} and not root: test binaries needing it will not be built (their tests are skipped)"
    return
  fi
  export DEBIAN_FRONTEND=noninteractive
  case "$(debian_major)" in
  12)
    # bookworm's golang-go is 1.19, too old for Kubernetes 1.32; bookworm-backports has 1.23.
    if [ -z "$g" ]; then
      add_backports bookworm
      apt_install -t bookworm-backports golang-go
    fi
    ;;
  13)
    # trixie's golang-go is 1.24; trixie-backports has a newer one (1.27).
    add_backports trixie
    apt_update
    log "installing Debian's golang-go from trixie-backports"
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends -t trixie-backports golang-go >&2 ||
      die "apt-get install -t trixie-backports golang-go failed"
    ;;
  *) [ -n "$g" ] || apt_install golang-go ;;
  esac
  hash -r
  g="$(find_go)" || die "installed Debian's golang-go but found no Go >= ${GO_MIN} ($(go version 2>&1 || true))"
  go_at_least "$g" "$GO_WANT" || g="$(fetch_go_toolchain "$g")"
  log "Go: $("$g" env GOVERSION) at $g"
}

# fetch_go_toolchain GO: Debian packages no Go >= GO_WANT (Debian 12 stops at 1.23): let GO (>= 1.21)
# fetch GO_TOOLCHAIN through the Go module proxy (the module golang.org/toolchain, what
# GOTOOLCHAIN=<version> does), keep it in GO_TOOLCHAIN_DIR and link it as /usr/local/bin/go.
# Prints the new go binary.
fetch_go_toolchain() {
  local base="$1" dest="$GO_TOOLCHAIN_DIR/$GO_TOOLCHAIN" tmp src
  if [ ! -x "$dest/bin/go" ]; then
    log "Debian's Go is $("$base" env GOVERSION); fetching ${GO_TOOLCHAIN} through the Go module proxy ($("$base" env GOPROXY))"
    tmp="$(mktemp -d)"
    GOPATH="$tmp" GOMODCACHE="$tmp/mod" GOFLAGS=-modcacherw GOTOOLCHAIN="$GO_TOOLCHAIN" \
      "$base" version >&2 || { rm -rf "$tmp"; die "could not fetch ${GO_TOOLCHAIN} through the Go module proxy"; }
    src="$(find "$tmp/mod/golang.org" -maxdepth 1 -type d -name "toolchain@*-${GO_TOOLCHAIN}.*" | head -1)"
    [ -x "$src/bin/go" ] || { rm -rf "$tmp"; die "the fetched ${GO_TOOLCHAIN} has no bin/go"; }
    mkdir -p "$GO_TOOLCHAIN_DIR"
    rm -rf "$dest.tmp" && mv "$src" "$dest.tmp" && mv "$dest.tmp" "$dest"
    rm -rf "$tmp"
  fi
  ln -sfn "$dest/bin/go" /usr/local/bin/go
  hash -r
  go_at_least "$dest/bin/go" "$GO_WANT" || die "$dest/bin/go is not Go >= ${GO_WANT}"
  echo "$dest/bin/go"
}

# The Debian cargo package whose rustc candidate reaches the engine's rust-version: cargo-web
# (rustc-web; Debian 12 ships it in bookworm-security for the browsers) or cargo (rustc).
rust_package_candidate() {
  local need="$1" cargo rustc v
  for cargo in cargo-web cargo; do
    rustc="rustc${cargo#cargo}"
    v="$(apt-cache policy "$rustc" 2>/dev/null | awk '/Candidate:/ {print $2}')"
    v="${v#*:}"
    v="${v%%[+~-]*}"
    if [ -z "$v" ] || [ "$v" = "(none)" ]; then continue; fi
    if [ "$(printf '%s\n%s\n' "$need" "$v" | sort -V | head -1)" = "$need" ]; then
      echo "$cargo"
      return 0
    fi
  done
  return 1
}

ensure_engine_toolchain() {
  if ! is_root; then
    log "WARNING: not root: the engine's build dependencies not checked (${APT_ENGINE_BUILD[*]})"
    return
  fi
  apt_install "${APT_ENGINE_BUILD[@]}"
  local need have="" rustc p
  need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$ROOT_DIR/src/engine/Cargo.toml")"
  rustc="$(command -v rustc || echo "$HOME/.cargo/bin/rustc")"
  if [ -x "$rustc" ]; then have="$("$rustc" -V | awk '{print $2}')"; fi
  if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "${have%%-*}" | sort -V | head -1)" = "$need" ]; then
    return
  fi
  # Debian ships the newer Rust as cargo-web in its security suite (for the browsers); a root made
  # by debootstrap has no security suite configured: add it as a Debian installation does.
  add_security_suite
  apt_update
  if p="$(rust_package_candidate "$need")"; then
    apt_install "$p"
  else
    log "WARNING: no Rust >= $need on PATH (found '${have:-none}') nor from apt (Debian 12 and 13 package it as cargo-web, which installs /usr/bin/cargo; their cargo is older): install a Rust >= $need toolchain, else the engine's tests are skipped (CI=true fails on that)"
  fi
}

ensure_npm_deps() {
  log "fetching npm dependencies pinned by deno.lock"
  (cd "$ROOT_DIR" && deno install --frozen >&2) || die "deno install --frozen failed: is deno.lock in sync with deno.json?"
  # `deno bundle` fetches esbuild from npm on first use; the kubelet emulator bundles the mounter
  # (always in one kubelet test, and for a clone others cannot read), `deno task build` too:
  # fetch it now rather than in the middle of a test run.
  local out
  out="$(mktemp -d)"
  (cd "$ROOT_DIR" && deno bundle --quiet --platform deno --packages bundle --output "$out/mounter.js" src/cmd/mounter/main.ts >&2) ||
    { rm -rf "$out"; die "deno bundle failed (it fetches esbuild from npm on first use)"; }
  rm -rf "$out"
}

# The tests run the mounter from this clone as uid 1000 (the Mountpoint Pod's user): every
# directory down to it must be searchable by others (a clone under /root, mode 0700, is not).
check_clone_readable() {
  is_root || return 0
  command -v setpriv >/dev/null 2>&1 || return 0
  if ! setpriv --reuid=1000 --regid=1000 --clear-groups test -r "$ROOT_DIR/src/cmd/mounter/main.ts"; then
    log "WARNING: uid 1000 cannot read $ROOT_DIR/src/cmd/mounter/main.ts: the tests run the mounter from this clone as uid 1000 and will fail (scripts/test.sh stops at once). Clone it where other users can read it (e.g. /srv or /opt; /root is private), or make its parent directories searchable (chmod o+x)"
  fi
}

# build_with WHAT SCRIPT: run a test binary's own build script (idempotent: nothing to do when its
# cache is up to date). Its exit 3 means "cannot build here": a warning, as the tests then report
# those tests skipped with the reason (CI=true fails on that); any other failure stops setup.
build_with() {
  local what="$1" script="$2" rc=0
  if [ ! -f "$ROOT_DIR/$script" ]; then
    log "no $script in this checkout: $what not built"
    return 0
  fi
  log "building $what ($script)"
  bash "$ROOT_DIR/$script" >/dev/null || rc=$?
  case "$rc" in
  0) ;;
  3) log "WARNING: $what cannot be built here (reason above); the tests needing it will be skipped (CI=true fails on that)" ;;
  *) die "$script failed (exit $rc)" ;;
  esac
}

build_test_binaries() {
  local g
  if g="$(find_go)"; then export KUBE_REAL_GO="$g" CSI_SANITY_GO="$g" KUBELET_CLIENT_GO="$g" VGW_GO="$g"; fi
  build_with "our FUSE engine mount-s3" scripts/build_engine.sh
  build_with "the real kube-apiserver tier and kubectl" tests/testbed/services/kube_real/build.sh
  if is_root; then build_with "the real node's binaries" tests/testbed/services/real_node/build.sh; fi
  build_with "versitygw" tests/testbed/services/versitygw/build.sh
  build_with "csi-sanity" tests/testbed/services/csi_sanity/build.sh
  build_with "the kubelet-style gRPC client of the soak test" tests/adversarial/kubelet_client/build.sh
}

main() {
  local binaries=1
  while [ $# -gt 0 ]; do
    case "$1" in
    --no-test-binaries) binaries=0 ;;
    *) die "unknown option $1 (usage: setup.sh [--no-test-binaries])" ;;
    esac
    shift
  done
  ensure_deno
  ensure_apt_packages
  ensure_go
  ensure_engine_toolchain
  ensure_npm_deps
  check_clone_readable
  if [ "$binaries" = 1 ]; then build_test_binaries; fi
  log "ready: $(deno --version | head -1)"
}

main "$@"
