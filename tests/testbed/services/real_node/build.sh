#!/usr/bin/env bash
# Build what the real-node cluster runs, into caches outside the repo:
#   - etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
#     kube-proxy and kubectl from the kube_real tier's k8s.io/kubernetes module
#     (../kube_real/build.sh --node);
#   - pause (upstream build/pause/linux/pause.c of that module, gcc -static);
#   - the sidecar stand-ins (sidecars/, static Go binaries);
#   - their OCI image archives, plus busybox for test workloads (build_images.ts).
# Our driver's own images are built by scripts/build_images_local.ts.
#
# Usage: build.sh
#   stdout: KUBE_REAL_BIN=<dir> and REAL_NODE_IMAGES=<dir of *.oci.tar>
#   exit 0 ok | 1 build failed | 3 cannot build on this machine (reason on stderr)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

T0=$(date +%s)
[ -x /bin/busybox ] || rn_skip "/bin/busybox is missing (apt-get install busybox-static): test workloads use it"
for t in gcc deno tar; do
  command -v "$t" >/dev/null 2>&1 || rn_skip "'$t' is required (apt-get install ${RN_PACKAGES[*]}; Deno via scripts/setup.sh)"
done
rc=0
out="$("$RN_KUBE_REAL_DIR/build.sh" --node)" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
printf '%s\n' "$out" | tail -n 1

export GOTOOLCHAIN=local
GO="$(kr_find_go)" || rn_skip "no Go toolchain to build the sidecar stand-ins"
mkdir -p "$RN_CACHE/bin" "$RN_IMAGES" 2>/dev/null || rn_skip "cannot create $RN_CACHE (set REAL_NODE_CACHE)"

# pause: the upstream source from the module cache (the k8s.io/kubernetes
# version pinned by the kube_real module).
KDIR="$(cd "$KR_GOMOD_DIR" && GOFLAGS=-mod=readonly "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)"
PAUSE_C="$KDIR/build/pause/linux/pause.c"
[ -f "$PAUSE_C" ] || rn_die 1 "no build/pause/linux/pause.c in $KDIR"

# Skip the rest when nothing it depends on changed.
STAMP_WANT="$(
  {
    cd "$RN_HERE"
    find sidecars build_images.ts -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' -o -name '*.ts' \) |
      LC_ALL=C sort | xargs cat
    cat "$RN_REPO/scripts/oci_layout.ts" "$RN_REPO/scripts/image_rootfs.ts" "$PAUSE_C" /bin/busybox
    "$GO" env GOVERSION
    gcc --version | head -1
    echo "$RN_IMAGE_PREFIX"
  } | sha256sum | cut -d' ' -f1
)"
if [ "$(cat "$RN_CACHE/stamp" 2>/dev/null || true)" = "$STAMP_WANT" ] && [ -n "$(ls "$RN_IMAGES"/*.oci.tar 2>/dev/null)" ]; then
  rn_log "pause, sidecar stand-ins and testbed images already built in $RN_CACHE"
  echo "REAL_NODE_IMAGES=$RN_IMAGES"
  exit 0
fi
rm -f "$RN_CACHE/stamp"

gcc -Os -Wall -Werror -static -s -DVERSION="v3.10-s3csi" -o "$RN_CACHE/bin/pause" "$PAUSE_C" ||
  rn_die 1 "gcc -static pause.c failed (static glibc: apt-get install libc6-dev)"

t=$(date +%s)
(
  cd "$RN_HERE/sidecars"
  CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" \
    timeout "${KUBE_REAL_BUILD_TIMEOUT:-3600}" "$GO" build -ldflags "-s -w" -o "$RN_CACHE/bin/" \
    ./cmd/csi-node-driver-registrar ./cmd/livenessprobe ./cmd/csi-provisioner
) || rn_die 1 "building the sidecar stand-ins failed"
rn_log "sidecar stand-ins built in $(($(date +%s) - t))s"

rm -f "$RN_IMAGES"/*.oci.tar
deno run --allow-read --allow-write --allow-run=tar,/bin/busybox \
  "$RN_HERE/build_images.ts" --bin-dir "$RN_CACHE/bin" --out "$RN_IMAGES" --prefix "$RN_IMAGE_PREFIX" >&2 ||
  rn_die 1 "writing the testbed image archives failed"
echo "$STAMP_WANT" >"$RN_CACHE/stamp"
rn_log "built in $(($(date +%s) - T0))s"
echo "REAL_NODE_IMAGES=$RN_IMAGES"
