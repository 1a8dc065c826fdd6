#!/usr/bin/env bash
# Proof that scripts/setup.sh installs everything the suite needs on a plain Debian that has only
# Node.js/npm: make a fresh Debian root with debootstrap (minbase: Essential packages and apt,
# nothing else), install nodejs + npm from Debian there, copy this checkout (git HEAD) into it, and
# run the README's two commands inside:
#
#   ./scripts/dev test        (with CI=true: a skip or an unavailable service fails it)
#   ./scripts/dev sandbox
#
# RUN BY HAND, NOT BY CI: it takes long (debootstrap, Ceph and Go from Debian, a cold Go build of
# the Kubernetes binaries, then the whole suite: about an hour per release on 2 cores) and needs
# root and the network (Debian mirror, npm registry, Go module proxy).
#
#   sudo scripts/fresh_debian_check.sh 12        # bookworm (also: 13 / trixie)
#   sudo scripts/fresh_debian_check.sh 13 --keep # keep the root for inspection
#   sudo scripts/fresh_debian_check.sh 12 --reuse /var/tmp/s3csi-fresh-bookworm-XXXX
#        # a kept root again, with this checkout's HEAD copied in afresh: setup.sh and the two
#        # commands only (not a fresh machine any more: to iterate on a fix it found);
#        # TEST_PATHS=tests/real_node/ (and TEST_FILTER) narrow the test command there
#
# How it runs, so that it proves the claim and disturbs nothing else on the machine:
#   - the root lives in /var/tmp/s3csi-fresh-<release>-XXXX; everything runs chrooted there in
#     mount and PID namespaces of their own (/proc, /sys and /dev bound in; nothing it mounts or
#     starts outlives it);
#   - the root reaches the network as this machine does: this machine's local CA certificates
#     (/usr/local/share/ca-certificates, e.g. a TLS-inspecting egress proxy's) and its proxy and
#     TLS environment variables are carried over — the machine's network, not a project need;
#   - phase 1, online: apt-get install nodejs npm, then `bash scripts/setup.sh` (what
#     ./scripts/dev runs first) downloads and builds what the suite needs;
#   - phase 2, offline (a network namespace with only loopback and a veth pair that leads nowhere,
#     for the real node's address; so the suite's fixed ports cannot
#     collide with anything on the machine, and anything setup.sh failed to install shows up as a
#     failure instead of being fetched on the fly): the two commands, verbatim.
# Prints each phase's duration and exit code; exit 0 only when both commands exited 0.
# Env: DEBIAN_MIRROR (default: the first Debian mirror in /etc/apt/sources.list*, else
# http://deb.debian.org/debian), FRESH_DIR (parent of the root, default /var/tmp).
set -euo pipefail

usage() { echo "usage: $0 12|13|bookworm|trixie [--keep | --reuse ROOT]" >&2; exit 2; }
log() { printf '\nfresh_debian_check: %s\n' "$*" >&2; }
die() { printf 'fresh_debian_check: error: %s\n' "$*" >&2; exit 1; }

[ $# -ge 1 ] || usage
case "$1" in
12 | bookworm) SUITE=bookworm ;;
13 | trixie) SUITE=trixie ;;
*) usage ;;
esac
KEEP=0
REUSE=""
case "${2:-}" in
"") ;;
--keep) KEEP=1 ;;
--reuse)
  REUSE="${3:-}"
  KEEP=1
  if [ ! -d "$REUSE/etc/apt" ]; then die "--reuse needs a root made by this script"; fi
  ;;
*) usage ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, namespaces)"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
command -v git >/dev/null || die "needs git (to copy this checkout's HEAD)"

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap on this machine"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } ||
    die "cannot install debootstrap"
fi
MIRROR="${DEBIAN_MIRROR:-$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 | tr -d ' ' || true)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
MIRROR="${MIRROR%/}"

if [ -n "$REUSE" ]; then
  ROOT="$REUSE"
else
  ROOT="$(mktemp -d "${FRESH_DIR:-/var/tmp}/s3csi-fresh-$SUITE-XXXX")"
  chmod 755 "$ROOT"
fi
START=$SECONDS
timings=()
phase_done() { timings+=("$1: $((SECONDS - $2)) s, exit $3"); log "$1: exit $3 after $((SECONDS - $2)) s"; }
cleanup() {
  if [ "$KEEP" = 1 ]; then log "root kept: $ROOT"; return; fi
  # Nothing is mounted outside the namespaces; the root is plain files.
  rm -rf --one-file-system "$ROOT" 2>/dev/null || log "could not remove $ROOT entirely"
}
trap cleanup EXIT

# ---- the fresh root ---------------------------------------------------------------------------
if [ -z "$REUSE" ]; then
t=$SECONDS
log "debootstrap --variant=minbase $SUITE $ROOT $MIRROR"
script=/usr/share/debootstrap/scripts/$SUITE
[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid # older debootstrap: same script
debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" "$script" >"$ROOT.debootstrap.log" 2>&1 ||
  { tail -20 "$ROOT.debootstrap.log" >&2; die "debootstrap failed (log $ROOT.debootstrap.log)"; }
rm -f "$ROOT.debootstrap.log"
cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
EOF
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
echo "s3csi-fresh-$SUITE" >"$ROOT/etc/hostname"
phase_done "debootstrap ($SUITE, minbase)" "$t" 0
fi

# Copy this checkout as committed (no build outputs, no node_modules), where other users can read
# it: the tests run the mounter from the clone as uid 1000 (a clone under /root would not do).
rm -rf "$ROOT/srv/s3-csi"
mkdir -p "$ROOT/srv/s3-csi"
git -C "$REPO" archive HEAD | tar -x -C "$ROOT/srv/s3-csi"

# in_root [--offline] CMD: run CMD (bash) chrooted in the fresh root, in mount and PID namespaces
# of its own (and, offline, a network namespace with only loopback). bash stays PID 1 there, so
# orphaned daemons are reaped; when it exits, the kernel ends everything left in the namespace.
in_root() {
  local net=() offline=0
  if [ "$1" = "--offline" ]; then net=(--net); offline=1; shift; fi
  # shellcheck disable=SC2016 # expanded by the inner bash
  unshare --mount --pid --fork "${net[@]}" --propagation private bash -c '
    set -e
    root="$1"; offline="$2"; cmd="$3"
    # The root must be a mount point: runc makes / a slave mount when it starts a container.
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/run"
    if [ "$offline" = 1 ]; then
      ip link set lo up
      # The real node needs a non-loopback address with a default route (the kubelet refuses
      # loopback): a veth pair inside this namespace gives one, and still leads nowhere.
      ip link add fresh0 type veth peer name fresh1
      ip addr add 198.51.100.1/24 dev fresh0
      ip link set fresh0 up
      ip link set fresh1 up
      ip route add default dev fresh0
    fi
    shift 3
    exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@" \
      /bin/bash -c "$cmd; exit \$?"
  ' bash "$ROOT" "$offline" "$1" "${NET_ENV[@]}"
}

# This machine's network settings, passed into the root (see the header).
NET_ENV=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY NODE_EXTRA_CA_CERTS \
  SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE DENO_CERT DENO_TLS_CA_STORE GOPROXY GOSUMDB \
  GONOSUMDB GOPRIVATE NPM_CONFIG_REGISTRY; do
  if [ -n "${!v:-}" ]; then NET_ENV+=("$v=${!v}"); fi
done

# ---- phase 1 (online): Node.js/npm, then setup.sh ---------------------------------------------
t=$SECONDS
rc=0
trust=""
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  trust="ca-certificates"
  log "carrying over this machine's local CA certificates: $(ls /usr/local/share/ca-certificates)"
fi
in_root "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq $trust nodejs npm >/dev/null && if [ -n '$trust' ]; then update-ca-certificates >/dev/null; fi && node --version && npm --version" ||
  rc=$?
phase_done "nodejs + npm from Debian" "$t" "$rc"
[ "$rc" -eq 0 ] || die "cannot install nodejs and npm in the fresh root"
t=$SECONDS
rc=0
in_root 'cd /srv/s3-csi && bash scripts/setup.sh' || rc=$?
phase_done "scripts/setup.sh (online)" "$t" "$rc"

# ---- phase 2 (offline): the README's two commands, verbatim -----------------------------------
# With --reuse, TEST_PATHS / TEST_FILTER (scripts/test.sh) may narrow the test command to the
# tiers being fixed; a fresh check always runs everything.
ONLY=""
if [ -n "$REUSE" ]; then
  for v in TEST_PATHS TEST_FILTER; do
    if [ -n "${!v:-}" ]; then ONLY+="$v=$(printf '%q' "${!v}") "; fi
  done
fi
test_rc=99 sandbox_rc=99
if [ "$rc" -eq 0 ]; then
  t=$SECONDS
  test_rc=0
  in_root --offline "cd /srv/s3-csi && CI=true $ONLY ./scripts/dev test" || test_rc=$?
  phase_done "CI=true ./scripts/dev test (offline)" "$t" "$test_rc"
  t=$SECONDS
  sandbox_rc=0
  in_root --offline 'cd /srv/s3-csi && ./scripts/dev sandbox' || sandbox_rc=$?
  phase_done "./scripts/dev sandbox (offline)" "$t" "$sandbox_rc"
fi

echo
echo "fresh Debian $SUITE check ($(cat "$ROOT/etc/debian_version" 2>/dev/null)), $((SECONDS - START)) s in all:"
printf '  %s\n' "${timings[@]}"
[ "$rc" -eq 0 ] && [ "$test_rc" -eq 0 ] && [ "$sandbox_rc" -eq 0 ]
