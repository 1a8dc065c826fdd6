#!/usr/bin/env bash
# Check a running real node (start.sh) end to end, with timings:
#   1. the node is Ready;
#   2. a privileged pod with a Bidirectional hostPath mount of the kubelet root
#      mounts a tmpfs that appears on the host, and its unmount too; /dev/fuse
#      opens in it;
#   3. a restricted uid-1000 pod (drop ALL, no privilege escalation, read-only
#      root, RuntimeDefault seccomp) has CapEff 0 and NoNewPrivs 1, and cannot
#      mount;
#   4. every image starts: the sidecar stand-ins and, unless --no-driver, our
#      s3-csi-node/-controller/-mounter (`--version`), rclone (and mount-s3 when
#      the image has it) in the Mountpoint image, and the Mountpoint image's
#      default user under the Mountpoint Pods' security context is uid 1000
#      with no capabilities;
#   5. unless --no-driver: the driver's real manifests (rendered by
#      src/cmd/render with only images and pull policy overridden) roll out on
#      the stand-in sidecars: the node DaemonSet (plugin, registrar,
#      livenessprobe), the controller Deployment and the provisioning
#      Deployment (CSI Controller service, csi-provisioner) become Ready, CSINode lists s3.csi.scality.com, the provisioner holds
#      its Lease; then everything is deleted and the driver deregisters.
# The driver images must be imported first (scripts/build_images_local.ts
# --import, or --build here).
#
# Usage: smoke.sh [--no-driver] [--build]
#   exit 0 all passed | 1 a check failed | 3 no running node (start.sh first)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DRIVER=1
BUILD=0
for a in "$@"; do
  case "$a" in
  --no-driver) DRIVER=0 ;;
  --build) BUILD=1 ;;
  *) rn_die 2 "usage: smoke.sh [--no-driver] [--build]" ;;
  esac
done
[ -s "$RN_STATE/env" ] || rn_skip "no running real node ($RN_STATE/env missing): run start.sh"
set -a
# shellcheck disable=SC1091
. "$RN_STATE/env"
set +a
K() { "$REAL_NODE_KUBECTL" --request-timeout=20s "$@"; }
K get --raw /readyz >/dev/null 2>&1 || rn_skip "the real node's apiserver does not answer: run start.sh"

NS="s3csi-smoke-$$"
REGISTRY=localhost/s3csi
VERSION="$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$RN_REPO/deno.json" | head -1)"
BB="$RN_IMAGE_PREFIX/busybox:host"
T_ALL=$(date +%s%N)
ms() { echo "$((($(date +%s%N) - $1) / 1000000)) ms"; }
pass() { printf 'smoke: PASS %s (%s)\n' "$1" "$2" >&2; }
fail() {
  printf 'smoke: FAIL %s\n' "$*" >&2
  K get pods -A -o wide >&2 || true
  exit 1
}
wait_phase() { # wait_phase POD PHASE SECONDS: until the pod is in PHASE (false early on Failed)
  local i phase
  for ((i = 0; i < $3 * 5; i++)); do
    phase="$(K -n "$NS" get pod "$1" -o 'jsonpath={.status.phase}' 2>/dev/null || true)"
    [ "$phase" = "$2" ] && return 0
    [ "$phase" = Failed ] && break
    sleep 0.2
  done
  K -n "$NS" describe pod "$1" >&2 || true
  return 1
}
cleanup() {
  K delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

# ---- 1. node Ready ---------------------------------------------------------------------------
t=$(date +%s%N)
[ "$(K get node "$REAL_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ] ||
  fail "node $REAL_NODE_NAME is not Ready"
pass "node $REAL_NODE_NAME Ready ($(K get node "$REAL_NODE_NAME" -o 'jsonpath={.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}'))" "$(ms "$t")"

K create namespace "$NS" >/dev/null
for _ in $(seq 100); do
  K -n "$NS" get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.1
done

# ---- 2. privileged pod, Bidirectional propagation, /dev/fuse --------------------------------
t=$(date +%s%N)
MNT="$RN_KUBELET_ROOT/s3csi-smoke-$$"
K -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: propagation}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $BB
    imagePullPolicy: Never
    command: [sh, -c]
    args:
    - |
      mkdir -p $MNT && mount -t tmpfs s3csi-smoke $MNT || exit 10
      exec 3<>/dev/fuse || exit 11
      echo mounted
      while [ ! -e $MNT/unmount ]; do sleep 0.1; done
      umount $MNT && rmdir $MNT && echo unmounted
    securityContext: {privileged: true}
    volumeMounts: [{name: kubelet, mountPath: $RN_KUBELET_ROOT, mountPropagation: Bidirectional}]
  volumes: [{name: kubelet, hostPath: {path: $RN_KUBELET_ROOT, type: Directory}}]
YAML
for _ in $(seq 300); do
  findmnt -rn "$MNT" >/dev/null 2>&1 && break
  sleep 0.1
done
[ "$(findmnt -rn -o FSTYPE "$MNT" 2>/dev/null)" = tmpfs ] || fail "the pod's tmpfs did not appear on the host at $MNT"
touch "$MNT/unmount"
wait_phase propagation Succeeded 30 || fail "the propagation pod did not succeed (exit 10: mount, 11: /dev/fuse)"
findmnt -rn "$MNT" >/dev/null 2>&1 && fail "the pod's unmount did not reach the host ($MNT still mounted)"
[ "$(K -n "$NS" logs propagation | tr '\n' ' ')" = "mounted unmounted " ] || fail "unexpected log: $(K -n "$NS" logs propagation)"
pass "privileged pod: tmpfs mounted with Bidirectional propagation appears on the host and goes away; /dev/fuse opens" "$(ms "$t")"

# ---- 3. restricted uid-1000 pod ------------------------------------------------------------------
t=$(date +%s%N)
K -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: restricted}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: c
    image: $BB
    imagePullPolicy: Never
    command: [sh, -c]
    args:
    - |
      echo "uid=\$(id -u)"
      grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t'
      touch /rootfs-write 2>/dev/null && echo rootfs=writable || echo rootfs=read-only
      mount -t tmpfs t /tmp 2>/dev/null && echo mount=allowed || echo mount=denied
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
YAML
wait_phase restricted Succeeded 30 || fail "the restricted pod did not succeed"
got="$(K -n "$NS" logs restricted | tr '\n' ' ')"
want="uid=1000 CapEff:0000000000000000 NoNewPrivs:1 Seccomp:2 rootfs=read-only mount=denied "
[ "$got" = "$want" ] || fail "restricted pod: got '$got', want '$want'"
pass "uid-1000 restricted pod: $got" "$(ms "$t")"

# ---- 4. images start -------------------------------------------------------------------------------
run_image() { # run_image NAME IMAGE EXPECT-REGEX [COMMAND-JSON] [ARGS-JSON] [SECURITY-JSON]
  local name="$1" image="$2" expect="$3" cmd="${4:-}" args="${5:-[--version]}" sec="${6:-}" out
  [ -n "$sec" ] || sec='{}'
  K -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: $image
    imagePullPolicy: Never
    ${cmd:+command: $cmd}
    args: $args
    securityContext: $sec
YAML
  wait_phase "$name" Succeeded 60 || fail "image $image did not run to completion"
  out="$(K -n "$NS" logs "$name" 2>&1)"
  grep -qE "$expect" <<<"$out" || fail "image $image printed '$out', expected /$expect/"
  printf '%s' "$(head -1 <<<"$out")"
}
t=$(date +%s%N)
for s in csi-node-driver-registrar livenessprobe csi-provisioner; do
  run_image "$s" "$RN_IMAGE_PREFIX/$s:standin" "s3csi-testbed-standin" >/dev/null
done
pass "sidecar stand-in images start" "$(ms "$t")"

if [ "$DRIVER" -eq 1 ]; then
  if [ "$BUILD" -eq 1 ]; then
    t=$(date +%s%N)
    (cd "$RN_REPO" && deno run -A scripts/build_images_local.ts --import \
      --containerd-address "$REAL_NODE_CONTAINERD_ADDRESS" --registry "$REGISTRY" --tag "$VERSION" >/dev/null) ||
      fail "scripts/build_images_local.ts failed"
    pass "driver images built and imported" "$(ms "$t")"
  fi
  imported="$(rn_ctr images ls -q)"
  for c in node controller mounter; do
    grep -qx "$REGISTRY/s3-csi-$c:$VERSION" <<<"$imported" ||
      fail "$REGISTRY/s3-csi-$c:$VERSION is not imported (scripts/build_images_local.ts --import, or smoke.sh --build)"
  done
  t=$(date +%s%N)
  v1="$(run_image node "$REGISTRY/s3-csi-node:$VERSION" "^s3-csi-node $VERSION")"
  v2="$(run_image controller "$REGISTRY/s3-csi-controller:$VERSION" "^s3-csi-controller $VERSION")"
  v3="$(run_image mounter "$REGISTRY/s3-csi-mounter:$VERSION" "^s3-csi-mounter $VERSION")"
  v4="$(run_image rclone "$REGISTRY/s3-csi-mounter:$VERSION" "^rclone v" '[/usr/bin/rclone]' '[version]')"
  # The Mountpoint image's own user (no runAsUser) under the Mountpoint Pods' restrictions.
  mp_sec='{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}'
  js='const l = Deno.readTextFileSync("/proc/self/status").split(String.fromCharCode(10)); console.log("uid=" + Deno.uid() + " " + l.find((x) => x.startsWith("CapEff")).split(String.fromCharCode(9)).join(""))'
  v5="$(run_image mounter-identity "$REGISTRY/s3-csi-mounter:$VERSION" "^uid=1000 CapEff:0000000000000000" \
    '[/usr/lib/s3-csi/deno]' "[eval, '$js']" "$mp_sec")"
  engine="$( (run_image mount-s3 "$REGISTRY/s3-csi-mounter:$VERSION" "." '[/usr/bin/mount-s3]' '[--version]') 2>/dev/null || true)"
  pass "driver images start: $v1 | $v2 | $v3 | $v4 | Mountpoint image default user: $v5 | mount-s3: ${engine:-absent (rclone only)}" "$(ms "$t")"

  # ---- 5. the real manifests on the stand-ins ------------------------------------------------------
  t=$(date +%s%N)
  values="$(mktemp)"
  manifests="$(mktemp)"
  trap 'rm -f "$values" "$manifests"; K delete -f "$manifests" --ignore-not-found --wait=false >/dev/null 2>&1 || true; cleanup' EXIT
  cat >"$values" <<YAML
image:
  registry: $REGISTRY
  tag: "$VERSION"
  pullPolicy: Never
  nodeDriverRegistrar: $RN_IMAGE_PREFIX/csi-node-driver-registrar:standin
  livenessProbe: $RN_IMAGE_PREFIX/livenessprobe:standin
  csiProvisioner: $RN_IMAGE_PREFIX/csi-provisioner:standin
YAML
  (cd "$RN_REPO" && deno run -A src/cmd/render/main.ts --values "$values" >"$manifests") || fail "rendering the manifests failed"
  K apply -f "$manifests" >/dev/null || fail "kubectl apply of the rendered manifests failed"
  K -n kube-system rollout status daemonset/s3-csi-node --timeout=120s >/dev/null || fail "the node DaemonSet did not roll out"
  K -n kube-system rollout status deployment/s3-csi-controller --timeout=120s >/dev/null || fail "the controller Deployment did not roll out"
  K -n kube-system rollout status deployment/s3-csi-provisioner --timeout=120s >/dev/null || fail "the provisioning Deployment did not roll out"
  for _ in $(seq 100); do
    K get csinode "$REAL_NODE_NAME" -o 'jsonpath={.spec.drivers[*].name}' 2>/dev/null | grep -qw s3.csi.scality.com && break
    sleep 0.2
  done
  K get csinode "$REAL_NODE_NAME" -o 'jsonpath={.spec.drivers[*].name}' | grep -qw s3.csi.scality.com ||
    fail "CSINode $REAL_NODE_NAME does not list s3.csi.scality.com (registrar stand-in)"
  holder=""
  for _ in $(seq 100); do
    holder="$(K -n kube-system get lease s3-csi-scality-com -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null || true)"
    [ -n "$holder" ] && break
    sleep 0.2
  done
  [ -n "$holder" ] || fail "the provisioner stand-in holds no Lease kube-system/s3-csi-scality-com"
  ready="$(K -n kube-system get pods -l app=s3-csi-node -o 'jsonpath={.items[0].status.containerStatuses[*].ready}')"
  [ "$ready" = "true true true" ] || fail "node plugin pod containers ready: $ready"
  pass "real manifests on the stand-ins: DaemonSet 3/3, controller 1/1 and provisioning 2/2 Ready, CSINode lists s3.csi.scality.com, provisioner Lease held by $holder" "$(ms "$t")"
  t=$(date +%s%N)
  K delete -f "$manifests" --wait=true --timeout=120s >/dev/null || fail "deleting the driver failed"
  for _ in $(seq 150); do
    K get csinode "$REAL_NODE_NAME" -o 'jsonpath={.spec.drivers[*].name}' 2>/dev/null | grep -qw s3.csi.scality.com || break
    sleep 0.2
  done
  K get csinode "$REAL_NODE_NAME" -o 'jsonpath={.spec.drivers[*].name}' 2>/dev/null | grep -qw s3.csi.scality.com &&
    fail "the driver is still registered after its DaemonSet was deleted"
  pass "driver deleted and deregistered" "$(ms "$t")"
fi
printf 'smoke: all checks passed in %s\n' "$(ms "$T_ALL")" >&2
