#!/usr/bin/env bash
# Install what building and testing this project needs, idempotently:
#   - Deno 2.9.6 from npm (the only Deno source these machines reach) when missing or different;
#   - when root: the Debian packages the test tiers use (FUSE, rclone, openssl, util-linux, and
#     containerd/runc/CNI plugins/iptables for the real-node tier);
#   - the npm dependencies pinned by deno.lock.
# Works on Debian 12 and 13. Safe to run again; prints what it does on stderr.
set -euo pipefail

DENO_VERSION="2.9.6"
APT_PACKAGES=(fuse3 rclone openssl util-linux ca-certificates)
# The real-node tier (tests/testbed/services/real_node): containerd, runc, CNI plugins, iptables and
# nftables, tools the kubelet and kube-proxy call, a static libc for pause.c, busybox for test pods.
APT_PACKAGES+=(containerd runc containernetworking-plugins iptables nftables conntrack socat ethtool
  ebtables iproute2 curl procps gcc libc6-dev busybox-static)
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

ensure_npm_deps() {
  log "fetching npm dependencies pinned by deno.lock"
  (cd "$ROOT_DIR" && deno install --frozen >&2) || die "deno install --frozen failed: is deno.lock in sync with deno.json?"
}

ensure_deno
ensure_apt_packages
ensure_npm_deps
log "ready: $(deno --version | head -1)"
