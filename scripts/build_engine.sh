#!/usr/bin/env bash
# Build our FUSE engine `mount-s3` and the Mountpoint Pod's supervisor `s3-csi-supervisor` (the
# Rust crate in src/engine) into a cache outside the repository, keyed by the sha256 of its
# Cargo.lock, manifest, sources, vendored crate and the Rust toolchain. Both binaries land in the
# same cache dir: the supervisor is `$(dirname ENGINE_BIN)/s3-csi-supervisor`.
# A cached binary is reused (seconds); a changed crate rebuilds incrementally in the cache's
# shared target dir.
#
# Usage: scripts/build_engine.sh [--no-build | --test | --toolchain]
#   --no-build   only look in the cache: print the binary if it is built, else exit 3
#   --test       run the crate's unit tests (cargo test --release, sharing the cache's target dir:
#                only the crate itself is compiled again); exit 0 passed | 1 failed | 3 cannot
#   --toolchain  only check for a toolchain that can build the crate: print it (`rustc -V`),
#                else exit 3 with the reason (what the crate's tests need before they can run)
#   stdout (last line): ENGINE_BIN=<cache>/<key>/mount-s3
#   exit 0 ok | 1 build failed | 3 cannot build on this machine (reason on stderr)
#
# Env: S3CSI_ENGINE_CACHE          cache dir (default /var/cache/s3csi-engine)
#      S3CSI_ENGINE_CARGO          cargo binary (default: cargo on PATH, ~/.cargo/bin/cargo)
#      S3CSI_ENGINE_BUILD_TIMEOUT  seconds for cargo build (default 3600; ~6-12 min cold on 2 cores)
#
# Needs: cargo/rustc >= the crate's rust-version (1.95), a C compiler, cmake, pkg-config with
# libfuse (libfuse-dev), libclang (libclang-dev). scripts/setup.sh installs them as root.
set -euo pipefail

ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRATE="$ROOT_DIR/src/engine"
CACHE="${S3CSI_ENGINE_CACHE:-/var/cache/s3csi-engine}"
TIMEOUT="${S3CSI_ENGINE_BUILD_TIMEOUT:-3600}"
NO_BUILD=0
TEST=0
TOOLCHAIN_ONLY=0

log() { printf 'build_engine: %s\n' "$*" >&2; }
die() { printf 'build_engine: ERROR: %s\n' "$*" >&2; exit 1; }
skip() { printf 'build_engine: SKIP: %s\n' "$*" >&2; exit 3; }

case "${1:-}" in
  "") ;;
  --no-build) NO_BUILD=1 ;;
  --test) TEST=1 ;;
  --toolchain) TOOLCHAIN_ONLY=1 ;;
  *) printf 'usage: %s [--no-build | --test | --toolchain]\n' "$0" >&2; exit 2 ;;
esac
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "S3CSI_ENGINE_BUILD_TIMEOUT must be a number of seconds"
[[ "$CACHE" == /* && "$CACHE" != / ]] || die "S3CSI_ENGINE_CACHE must be an absolute path other than /"
[ -f "$CRATE/Cargo.lock" ] || die "$CRATE/Cargo.lock is missing"

find_cargo() {
  if [ -n "${S3CSI_ENGINE_CARGO:-}" ]; then
    [ -x "$S3CSI_ENGINE_CARGO" ] && echo "$S3CSI_ENGINE_CARGO"
  elif command -v cargo >/dev/null 2>&1; then
    command -v cargo
  elif [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "$HOME/.cargo/bin/cargo"
  else
    return 1
  fi
}

# version_ge A B: A >= B for dotted versions.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

NEED_RUST="$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$CRATE/Cargo.toml")"
TOOLCHAIN="none"
TOOL_PROBLEM=""
if CARGO="$(find_cargo)"; then
  # rustc beside cargo first (rustup and Debian's cargo-web both install them together).
  RUSTC="$(dirname "$CARGO")/rustc"
  [ -x "$RUSTC" ] || RUSTC="$(command -v rustc || true)"
  if [ -z "$RUSTC" ]; then
    TOOL_PROBLEM="cargo found at $CARGO but no rustc"
  else
    TOOLCHAIN="$("$RUSTC" -V 2>/dev/null || true)"
    have="$(printf '%s\n' "$TOOLCHAIN" | awk '{print $2}')"
    if [ -z "$have" ] || ! version_ge "${have%%-*}" "$NEED_RUST"; then
      TOOL_PROBLEM="rustc >= $NEED_RUST needed (the Mountpoint crates need it), found '${TOOLCHAIN:-none}' at $RUSTC; run scripts/setup.sh as root (Debian 12: cargo-web/rustc-web from bookworm-security)"
    fi
  fi
else
  TOOL_PROBLEM="no cargo (not on PATH, no ~/.cargo/bin/cargo, S3CSI_ENGINE_CARGO='${S3CSI_ENGINE_CARGO:-}'); run scripts/setup.sh as root"
fi

if [ "$TOOLCHAIN_ONLY" = 1 ]; then
  [ -z "$TOOL_PROBLEM" ] || skip "$TOOL_PROBLEM"
  echo "$TOOLCHAIN"
  exit 0
fi

# Key: what decides the binary. The toolchain is part of it; without one, look for any cached
# binary of these sources.
sources_hash() {
  (
    cd "$CRATE"
    { printf '%s\n' Cargo.lock Cargo.toml build.rs; find src vendor patches -type f | LC_ALL=C sort; } |
      while read -r f; do printf '%s\n' "$f"; sha256sum <"$f"; done
  ) | sha256sum | cut -c1-16
}
SRC_KEY="$(sources_hash)"
KEY="$SRC_KEY-$(printf '%s' "$TOOLCHAIN" | sha256sum | cut -c1-8)"
BIN="$CACHE/$KEY/mount-s3"
SUPERVISOR_BIN="$CACHE/$KEY/s3-csi-supervisor"

if [ -x "$BIN" ] && [ -x "$SUPERVISOR_BIN" ] && [ "$TEST" = 0 ]; then
  log "cached: $BIN"
  echo "ENGINE_BIN=$BIN"
  exit 0
fi
[ "$TEST" = 1 ] && [ -n "$TOOL_PROBLEM" ] && skip "$TOOL_PROBLEM"
if [ -n "$TOOL_PROBLEM" ] || [ "$NO_BUILD" = 1 ]; then
  # Same sources built by another toolchain are good enough to run.
  for other in "$CACHE/$SRC_KEY"-*/mount-s3; do
    if [ -x "$other" ] && [ -x "$(dirname "$other")/s3-csi-supervisor" ]; then
      log "${TOOL_PROBLEM:-not building (--no-build)}; using $other built by another toolchain"
      echo "ENGINE_BIN=$other"
      exit 0
    fi
  done
  [ -n "$TOOL_PROBLEM" ] && skip "$TOOL_PROBLEM"
  skip "mount-s3 for these sources is not built (key $KEY); run scripts/build_engine.sh"
fi

missing=()
command -v cc >/dev/null 2>&1 || missing+=("a C compiler (gcc)")
command -v cmake >/dev/null 2>&1 || missing+=("cmake")
if ! command -v pkg-config >/dev/null 2>&1; then
  missing+=("pkg-config")
elif ! pkg-config --exists fuse3 && ! pkg-config --exists fuse; then
  missing+=("libfuse headers (libfuse-dev)")
fi
if [ -z "${LIBCLANG_PATH:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so'; then
  compgen -G '/usr/lib/llvm-*/lib/libclang*.so*' >/dev/null || missing+=("libclang (libclang-dev)")
fi
((${#missing[@]} == 0)) || skip "missing build dependencies: ${missing[*]}; run scripts/setup.sh as root"

mkdir -p "$CACHE" 2>/dev/null || skip "cannot create $CACHE (set S3CSI_ENGINE_CACHE)"
[ -w "$CACHE" ] || skip "$CACHE is not writable (set S3CSI_ENGINE_CACHE)"
exec 9>"$CACHE/.lock"
flock -w "$TIMEOUT" 9 || die "timed out waiting for another build holding $CACHE/.lock"
if [ "$TEST" = 1 ]; then
  log "cargo test --release ($KEY) with $TOOLCHAIN; target dir $CACHE/target"
  rc=0
  (
    cd "$CRATE"
    CARGO_TARGET_DIR="$CACHE/target" timeout "$TIMEOUT" "$CARGO" test --release --locked >&2
  ) || rc=$?
  [ "$rc" -eq 0 ] || die "cargo test failed (exit $rc)"
  exit 0
fi
if [ -x "$BIN" ] && [ -x "$SUPERVISOR_BIN" ]; then # built while we waited
  log "cached: $BIN"
  echo "ENGINE_BIN=$BIN"
  exit 0
fi

log "building mount-s3 ($KEY) with $TOOLCHAIN; target dir $CACHE/target (cold: ~6-12 min on 2 cores)"
started=$SECONDS
rc=0
(
  cd "$CRATE"
  CARGO_TARGET_DIR="$CACHE/target" timeout "$TIMEOUT" "$CARGO" build --release --locked --bins >&2
) || rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 124 ] && die "cargo build timed out after ${TIMEOUT}s"
  die "cargo build failed (exit $rc)"
fi
mkdir -p "$CACHE/$KEY"
cp "$CACHE/target/release/s3-csi-supervisor" "$SUPERVISOR_BIN.tmp"
mv "$SUPERVISOR_BIN.tmp" "$SUPERVISOR_BIN"
cp "$CACHE/target/release/mount-s3" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
log "built in $((SECONDS - started)) s: $BIN ($(du -h "$BIN" | cut -f1))"

# Keep the three newest binaries.
# shellcheck disable=SC2012 # names are our own hex keys
ls -1td "$CACHE"/*/mount-s3 2>/dev/null | tail -n +4 | while read -r old; do
  rm -rf "$(dirname "$old")"
done
echo "ENGINE_BIN=$BIN"
