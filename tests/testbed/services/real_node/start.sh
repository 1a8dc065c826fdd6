#!/usr/bin/env bash
# Start a real single-node Kubernetes on this machine for tests and the
# sandbox: containerd + runc + CNI bridge (Debian), etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy (built from
# the k8s.io/kubernetes module by build.sh). Needs root.
#
# Usage: start.sh [--check]
#   --check: only say whether this machine can run a node (exit 0 or 3 with the reason), without
#            building or starting anything
#   stdout: KEY=VALUE lines (also written to <state>/env):
#     KUBECONFIG=<admin kubeconfig>   REAL_NODE_KUBECTL=<kubectl of the same version>
#     REAL_NODE_NAME=<node name>      REAL_NODE_IP=<node address>
#     REAL_NODE_CONTAINERD_ADDRESS=<containerd socket> (ctr -n k8s.io ...)
#     REAL_NODE_IMAGE_PREFIX=<prefix of the testbed images> REAL_NODE_STATE=<state dir>
#   exit 0 ready | 1 failed (logs in <state>/logs) | 3 cannot run here (reason on stderr)
# Idempotent: a healthy running node is reused (same data); anything else is
# stopped (stop.sh) and a fresh, empty cluster is started.
#
# Env: REAL_NODE_STATE (/var/tmp/s3csi-real-node), REAL_NODE_RUN (/run/s3csi-real-node),
#      REAL_NODE_CACHE, REAL_NODE_START_TIMEOUT (180 s), REAL_NODE_IMPORT (extra
#      OCI archives to import, space-separated), REAL_NODE_NAME, REAL_NODE_IP,
#      REAL_NODE_POD_CIDR, REAL_NODE_SERVICE_CIDR, REAL_NODE_BRIDGE, REAL_NODE_*_PORT,
#      REAL_NODE_KUBELET_V (kubelet log level, 2).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CHECK_ONLY=0
case "${1:-}" in
"") ;;
--check) CHECK_ONLY=1 ;;
*) rn_die 2 "usage: start.sh [--check]" ;;
esac
START_TIMEOUT="${REAL_NODE_START_TIMEOUT:-180}"
T_BEGIN=$(date +%s%N)
elapsed() { echo "$((($(date +%s%N) - T_BEGIN) / 1000000))ms"; }

# ---- can this machine run a node? (exit 3 with the reason) ----------------------------
[ "$(uname -s)" = Linux ] || rn_skip "only Linux is supported"
[ "$(id -u)" -eq 0 ] || rn_skip "must run as root (kubelet, containerd, mounts, iptables)"
for t in containerd containerd-shim-runc-v2 runc ctr iptables iptables-save iptables-restore ip6tables \
  nft ip conntrack openssl curl flock setsid timeout findmnt mountpoint sysctl pgrep unshare nsenter; do
  command -v "$t" >/dev/null 2>&1 ||
    rn_skip "'$t' is missing (apt-get install ${RN_PACKAGES[*]})"
done
CNI_BIN=""
for d in /usr/lib/cni /opt/cni/bin; do
  if [ -x "$d/bridge" ] && [ -x "$d/host-local" ] && [ -x "$d/loopback" ]; then
    CNI_BIN="$d"
    break
  fi
done
[ -n "$CNI_BIN" ] || rn_skip "CNI plugins bridge/host-local/loopback not found (apt-get install containernetworking-plugins)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || rn_skip "the kernel has no overlay file system (containerd's snapshotter)"
[ -n "$(findmnt -rn -t cgroup,cgroup2 -o TARGET 2>/dev/null)" ] || rn_skip "no cgroup file system is mounted"
NODE_IP="$(rn_node_ip)"
[ -n "$NODE_IP" ] || rn_skip "no non-loopback IPv4 address with a default route (set REAL_NODE_IP)"
case "$NODE_IP" in 127.*) rn_skip "node address $NODE_IP is loopback: the kubelet refuses it (set REAL_NODE_IP)" ;; esac
NODE_NAME="$(rn_node_name)"
[[ "$NODE_NAME" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || rn_skip "hostname '$NODE_NAME' is not a valid node name (set REAL_NODE_NAME)"

# Someone else's node on this machine?
for p in $(pgrep -x kubelet || true) $(pgrep -x kube-proxy || true); do
  if ! (tr '\0' ' ' <"/proc/$p/cmdline") 2>/dev/null | grep -qF "$RN_STATE"; then
    rn_skip "another kubelet/kube-proxy runs on this machine (pid $p)"
  fi
done
if [ -d "$RN_KUBELET_ROOT" ] && ! mountpoint -q "$RN_KUBELET_ROOT" && [ -n "$(ls -A "$RN_KUBELET_ROOT")" ]; then
  rn_skip "$RN_KUBELET_ROOT is in use by something else (not empty); a real node needs it"
fi

if [ "$CHECK_ONLY" -eq 1 ]; then
  # What build.sh needs too (it exits 3 on the same problems).
  [ -x /bin/busybox ] || rn_skip "/bin/busybox is missing (apt-get install busybox-static): test workloads use it"
  for t in gcc deno tar; do
    command -v "$t" >/dev/null 2>&1 || rn_skip "'$t' is required (apt-get install ${RN_PACKAGES[*]})"
  done
  if ! kr_find_go >/dev/null; then
    for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
      [ -x "$KR_BIN/$b" ] || rn_skip "no Go toolchain to build the cluster binaries (go not on PATH, no /usr/local/go/bin/go)"
    done
    [ -n "$(ls "$RN_IMAGES"/*.oci.tar 2>/dev/null)" ] || rn_skip "no Go toolchain to build the sidecar stand-ins"
  fi
  exit 0
fi

# ---- binaries and testbed images (no-op when cached) ------------------------------------
rc=0
"$RN_HERE/build.sh" >/dev/null || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  [ -x "$KR_BIN/$b" ] || rn_die 1 "missing $KR_BIN/$b after build.sh"
done

mkdir -p "$RN_STATE" 2>/dev/null || rn_skip "cannot create state dir $RN_STATE (set REAL_NODE_STATE)"
exec 8>"$RN_STATE/.lock"
flock -w "$((START_TIMEOUT + 120))" 8 || rn_die 1 "another start/stop holds $RN_STATE/.lock"

APISERVER_URL="https://$NODE_IP:$RN_APISERVER_PORT"
ETCD_URL="http://127.0.0.1:$RN_ETCD_PORT"
KUBECTL="$KR_BIN/kubectl"
KCFG="$RN_STATE/kubeconfig"

write_env() {
  cat >"$RN_STATE/env.tmp" <<ENV
KUBECONFIG=$KCFG
REAL_NODE_KUBECTL=$KUBECTL
REAL_NODE_NAME=$NODE_NAME
REAL_NODE_IP=$NODE_IP
REAL_NODE_CONTAINERD_ADDRESS=$RN_RUN/containerd.sock
REAL_NODE_IMAGE_PREFIX=$RN_IMAGE_PREFIX
REAL_NODE_STATE=$RN_STATE
ENV
  mv "$RN_STATE/env.tmp" "$RN_STATE/env"
  cat "$RN_STATE/env"
}
kc() { "$KUBECTL" --kubeconfig "$KCFG" --request-timeout=10s "$@"; }
node_ready() {
  [ "$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
all_alive() {
  local n
  for n in "${RN_PROCS[@]}"; do kr_live_pid "$RN_STATE/$n.pid" >/dev/null || return 1; done
}

# ---- already running? ---------------------------------------------------------------------
if all_alive && [ -s "$KCFG" ] && node_ready && [ "$(cat "$RN_STATE/node_ip" 2>/dev/null)" = "$NODE_IP" ]; then
  rn_log "already running ($APISERVER_URL, node $NODE_NAME); reusing it"
  write_env
  exit 0
fi
# Leftovers of an earlier run (crash, reboot, failed start) are cleaned up first.
if ls "$RN_STATE"/*.pid >/dev/null 2>&1 || [ -d "$RN_RUN" ] || mountpoint -q "$RN_KUBELET_ROOT"; then
  REAL_NODE_STOP_NOLOCK=1 "$RN_HERE/stop.sh" >&2 || rn_die 1 "could not clean up a previous run (see above)"
fi

for p in "$RN_ETCD_PORT" "$RN_ETCD_PEER_PORT" "$RN_KCM_PORT" "$RN_SCHEDULER_PORT" \
  "$RN_KUBELET_HEALTHZ_PORT" "$RN_PROXY_METRICS_PORT" "$RN_PROXY_HEALTHZ_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then rn_die 1 "port 127.0.0.1:$p is in use (set REAL_NODE_*_PORT)"; fi
done
for p in "$RN_APISERVER_PORT" "$RN_KUBELET_PORT"; do
  if (exec 3<>"/dev/tcp/$NODE_IP/$p") 2>/dev/null; then rn_die 1 "port $NODE_IP:$p is in use (set REAL_NODE_*_PORT)"; fi
done
if ip route show | grep -qF "${RN_POD_CIDR%/*}"; then
  rn_die 1 "pod subnet $RN_POD_CIDR is already routed on this machine (set REAL_NODE_POD_CIDR)"
fi

# ---- baseline: what the host looks like before we touch it (stop.sh / check_clean.sh) -----
rm -rf "$RN_STATE/baseline"
"$RN_HERE/check_clean.sh" --record "$RN_STATE/baseline" || rn_die 1 "could not record the host baseline"

# ---- fresh state ------------------------------------------------------------------------------
rm -rf "$RN_STATE/etcd-data" "$RN_STATE/pki" "$RN_STATE/logs" "$RN_STATE/kubelet" "$RN_STATE/containerd" \
  "$RN_STATE/cni" "$RN_STATE/pod-logs" "$RN_STATE/manifests" "$RN_STATE"/*.kubeconfig "$RN_STATE"/*.yaml \
  "$KCFG" "$RN_STATE/env"
mkdir -p "$RN_STATE"/{pki,logs,kubelet,containerd,cni/net.d,cni/ipam,pod-logs,manifests} "$RN_RUN"
chmod 700 "$RN_STATE/pki"
echo "$NODE_IP" >"$RN_STATE/node_ip"

# PKI: a CA, serving certs for the apiserver and the kubelet, client certs for
# everyone (EC P-256 keys: fast to make).
PKI="$RN_STATE/pki"
cert() { rn_cert "$PKI" "$@"; }
rn_newkey "$PKI/ca.key"
openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=s3csi-real-node-ca" -days 30 -sha256 \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$PKI/ca.crt" 2>/dev/null
SVC_IP="$(awk -F'[./]' '{ print $1"."$2"."$3"."$4+1 }' <<<"$RN_SERVICE_CIDR")"
cert apiserver "/CN=kube-apiserver" "$RN_SERVER_EXT
subjectAltName=IP:$NODE_IP,IP:127.0.0.1,IP:$SVC_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet-serving "/CN=$NODE_NAME" "$RN_SERVER_EXT
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$RN_CLIENT_EXT"
cert admin "/O=system:masters/CN=s3csi-real-node-admin" "$RN_CLIENT_EXT"
cert kube-controller-manager "/CN=system:kube-controller-manager" "$RN_CLIENT_EXT"
cert kube-scheduler "/CN=system:kube-scheduler" "$RN_CLIENT_EXT"
cert kube-proxy "/CN=system:kube-proxy" "$RN_CLIENT_EXT"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$RN_CLIENT_EXT"
rn_newkey "$PKI/sa.key"
openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

kubeconfig() { rn_kubeconfig "$1" "$PKI" "$2" "$APISERVER_URL"; }
kubeconfig "$KCFG" admin
for c in kube-controller-manager kube-scheduler kube-proxy kubelet; do kubeconfig "$RN_STATE/$c.kubeconfig" "$c"; done
rn_log "state and PKI ready ($(elapsed))"

launch() { # launch NAME BIN ARGS... : detached, no inherited fd, pid in <state>/NAME.pid
  local name="$1"
  shift
  (
    rn_close_fds
    exec setsid "$@" </dev/null >"$RN_STATE/logs/$name.log" 2>&1
  ) &
  echo $! >"$RN_STATE/$name.pid"
}
DEADLINE=$(($(date +%s) + START_TIMEOUT))
fail() { # fail NAME MESSAGE: show the log, clean up, exit 1
  tail -n 40 "$RN_STATE/logs/$1.log" >&2 2>/dev/null || true
  REAL_NODE_STOP_NOLOCK=1 "$RN_HERE/stop.sh" >&2 || true
  rn_die 1 "$2 (log: $RN_STATE/logs/$1.log)"
}
wait_for() { # wait_for NAME CHECK...
  local name="$1"
  shift
  while ! "$@"; do
    kr_live_pid "$RN_STATE/$name.pid" >/dev/null || fail "$name" "$name exited during startup"
    [ "$(date +%s)" -lt "$DEADLINE" ] || fail "$name" "$name not ready within ${START_TIMEOUT}s"
    sleep 0.2
  done
}

# ---- host: the kubelet root as a shared mount ---------------------------------------------
# / is a private mount here (no systemd): Bidirectional propagation needs the
# kubelet root to be a shared mount, so bind our state dir there.
mkdir -p "$RN_KUBELET_ROOT"
mount --bind "$RN_STATE/kubelet" "$RN_KUBELET_ROOT"
mount --make-rshared "$RN_KUBELET_ROOT"

# ---- containerd ---------------------------------------------------------------------------
rn_containerd_config "$RN_STATE/containerd/config.toml" "$RN_STATE" "$RN_RUN" "$CNI_BIN"
rn_cni_conflist "$RN_STATE/cni" "$RN_CNI_NETWORK" "$RN_BRIDGE" "$RN_POD_CIDR"
launch containerd containerd --config "$RN_STATE/containerd/config.toml"
ctr_ok() { rn_ctr version >/dev/null 2>&1; }
wait_for containerd ctr_ok
rn_log "containerd $(containerd --version | awk '{ print $3 }') up ($(elapsed))"

import() { # import ARCHIVE
  rn_ctr images import --all-platforms "$1" >>"$RN_STATE/logs/import.log" 2>&1 ||
    fail import "ctr images import $1 failed"
}
for a in "$RN_IMAGES"/*.oci.tar ${REAL_NODE_IMPORT:-}; do import "$a"; done
# The sandbox image must never be garbage-collected.
rn_ctr images label "$RN_PAUSE_IMAGE" io.cri-containerd.pinned=pinned >/dev/null
rn_log "images imported ($(elapsed))"

# ---- etcd -----------------------------------------------------------------------------------
launch etcd "$KR_BIN/etcd" \
  --name s3csi-real-node --data-dir "$RN_STATE/etcd-data" \
  --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
  --listen-peer-urls "http://127.0.0.1:$RN_ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$RN_ETCD_PEER_PORT" \
  --initial-cluster "s3csi-real-node=http://127.0.0.1:$RN_ETCD_PEER_PORT" \
  --initial-cluster-state new --log-level warn --unsafe-no-fsync
etcd_ok() { curl -s --max-time 2 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; }
wait_for etcd etcd_ok

# ---- kube-apiserver: on the node address (pods reach it via the kubernetes Service) ---------
launch kube-apiserver "$KR_BIN/kube-apiserver" \
  --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$RN_APISERVER_PORT" \
  --etcd-servers="$ETCD_URL" \
  --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$RN_SERVICE_CIDR" --profiling=false
api_ok() { [ "$(curl -s --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$APISERVER_URL/readyz" 2>/dev/null)" = ok ]; }
wait_for kube-apiserver api_ok
rn_log "etcd + kube-apiserver ready on $APISERVER_URL ($(elapsed))"

# ---- kube-controller-manager, kube-scheduler ------------------------------------------------
launch kube-controller-manager "$KR_BIN/kube-controller-manager" \
  --kubeconfig="$RN_STATE/kube-controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$RN_KCM_PORT" --cert-dir="$PKI/kcm" \
  --leader-elect=false --controllers='*' --use-service-account-credentials=true \
  --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --profiling=false
launch kube-scheduler "$KR_BIN/kube-scheduler" \
  --kubeconfig="$RN_STATE/kube-scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$RN_SCHEDULER_PORT" --cert-dir="$PKI/scheduler" \
  --leader-elect=false --profiling=false

# ---- kubelet ------------------------------------------------------------------------------
rn_kubelet_config "$RN_STATE" "$NODE_IP" "$RN_RUN/containerd.sock"
rn_kubelet_cmd "$NODE_NAME" "$NODE_IP"
launch kubelet "${RN_KUBELET_CMD[@]}"
wait_for kubelet node_ready
rn_log "kubelet: node $NODE_NAME Ready ($(elapsed))"

# ---- kube-proxy (iptables) -----------------------------------------------------------------
# Zero conntrack settings and no localhost node ports: kube-proxy then leaves
# the conntrack and route_localnet sysctls alone.
launch kube-proxy "$KR_BIN/kube-proxy" \
  --kubeconfig="$RN_STATE/kube-proxy.kubeconfig" --hostname-override="$NODE_NAME" \
  --proxy-mode=iptables --cluster-cidr="$RN_POD_CIDR" \
  --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
  --iptables-localhost-nodeports=false \
  --metrics-bind-address="127.0.0.1:$RN_PROXY_METRICS_PORT" --healthz-bind-address="127.0.0.1:$RN_PROXY_HEALTHZ_PORT"
proxy_ok() { curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RN_PROXY_HEALTHZ_PORT/healthz" 2>/dev/null | grep -q 200; }
wait_for kube-proxy proxy_ok

# Usable for pods once the default ServiceAccount and kube-root-ca.crt exist.
sa_ready() { kc -n default get serviceaccount default >/dev/null 2>&1 && kc -n default get configmap kube-root-ca.crt >/dev/null 2>&1; }
wait_for kube-controller-manager sa_ready
scheduler_ok() { [ "$(curl -sk --max-time 2 "https://127.0.0.1:$RN_SCHEDULER_PORT/healthz" 2>/dev/null)" = ok ]; }
wait_for kube-scheduler scheduler_ok
rn_log "cluster up in $(elapsed): KUBECONFIG=$KCFG"
write_env
