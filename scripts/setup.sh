#!/usr/bin/env bash
# Install what building and testing this project needs, idempotently:
#   - Deno 2.9.6 from npm (the only Deno source these machines reach) when missing or different;
#   - when root: the Debian packages the test tiers use (FUSE, rclone, openssl, util-linux, and
#     containerd/runc/CNI plugins/iptables for the real-node tier);
#   - the npm dependencies pinned by deno.lock;
#   - when root: the build dependencies of our FUSE engine (src/engine, a Rust crate) and a Rust
#     toolchain new enough for it when Debian has one (Debian 12: cargo-web from bookworm-security);
#     then the engine itself (scripts/build_engine.sh, cached outside the repository).
# Works on Debian 12 and 13. Safe to run again; prints what it does on stderr.
set -euo pipefail

DENO_VERSION="2.9.6"
APT_PACKAGES=(fuse3 rclone openssl util-linux ca-certificates)
# The real-node tier (tests/testbed/services/real_node): containerd, runc, CNI plugins, iptables and
# nftables, tools the kubelet and kube-proxy call, a static libc for pause.c, busybox for test pods.
APT_PACKAGES+=(containerd runc containernetworking-plugins iptables nftables conntrack socat ethtool
  ebtables iproute2 curl procps gcc libc6-dev busybox-static)
# Build dependencies of src/engine (the Mountpoint crates: libfuse, bindgen's libclang, the CRT's cmake).
ENGINE_BUILD_PACKAGES=(libfuse-dev libclang-dev pkg-config cmake gcc libc6-dev)
ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

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

ensure_apt_packages() {
  if [ "$(id -u)" -ne 0 ]; then
    log "not root: skipping Debian packages (${APT_PACKAGES[*]}); tests needing them will skip"
    return
  fi
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return
  log "installing Debian packages: ${missing[*]} (Debian $(cat /etc/debian_version 2>/dev/null || echo '?'))"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
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
  if [ "$(id -u)" -ne 0 ]; then
    log "not root: skipping the engine's build dependencies (${ENGINE_BUILD_PACKAGES[*]})"
    return
  fi
  local missing=() p
  for p in "${ENGINE_BUILD_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  local need have="" rustc
  need="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$ROOT_DIR/src/engine/Cargo.toml")"
  rustc="$(command -v rustc || echo "$HOME/.cargo/bin/rustc")"
  if [ -x "$rustc" ]; then have="$("$rustc" -V | awk '{print $2}')"; fi
  if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$need" "${have%%-*}" | sort -V | head -1)" != "$need" ]; then
    apt-get update -qq >&2 || die "apt-get update failed"
    if p="$(rust_package_candidate "$need")"; then
      missing+=("$p")
    else
      log "no Rust >= $need on PATH (found '${have:-none}') nor from apt (Debian 12 has it as cargo-web; Debian 13's cargo is 1.85): install a Rust >= $need toolchain, else the engine tests skip"
    fi
  fi
  [ "${#missing[@]}" -eq 0 ] && return
  log "installing engine build dependencies: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
}

ensure_engine() {
  local rc=0
  bash "$ROOT_DIR/scripts/build_engine.sh" >/dev/null || rc=$?
  case "$rc" in
    0) ;;
    3) log "the engine (mount-s3) cannot be built here (see above); its tests will skip" ;;
    *) die "scripts/build_engine.sh failed (exit $rc)" ;;
  esac
}

ensure_npm_deps() {
  log "fetching npm dependencies pinned by deno.lock"
  (cd "$ROOT_DIR" && deno install --frozen >&2) || die "deno install --frozen failed: is deno.lock in sync with deno.json?"
}

ensure_deno
ensure_apt_packages
ensure_npm_deps
ensure_engine_toolchain
ensure_engine
log "ready: $(deno --version | head -1)"
