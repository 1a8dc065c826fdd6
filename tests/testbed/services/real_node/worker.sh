#!/usr/bin/env bash
# A second node for the running real node (start.sh): its own containerd, kubelet and kube-proxy
# on this machine, joined to the same control plane, for scenarios that need somewhere to go
# (drain) or one volume on two nodes. Needs root.
#
# Isolation: a network namespace of its own (a veth pair to the host, its own bridge and pod
# subnet, its own iptables for kube-proxy; the host routes the node's pod subnet to it) and a mount
# namespace of its own (both held by a `sleep` process, ns-holder.pid), where /var/lib/kubelet is
# its own dir (the driver's kubelet path is the same on both nodes, as in a real cluster) and
# /run/netns and /var/log/containers are private. Its containerd has its own root, state and sockets; its kubelet its own root dir, certs,
# log dir and cgroup root (/s3csi-worker: the first kubelet owns /kubepods and would remove pod
# cgroups it does not know).
#
# Usage: worker.sh start   stdout: KEY=VALUE lines (also written to <state>/worker/env):
#                            REAL_NODE_WORKER_NAME, REAL_NODE_WORKER_IP,
#                            REAL_NODE_WORKER_CONTAINERD_ADDRESS, REAL_NODE_WORKER_STATE
#        worker.sh stop    pods on it deleted (the kubelet tears them down), the Node object
#                          deleted, processes stopped, namespaces, cgroups and routes removed
#   exit 0 done | 1 failed (logs in <state>/worker/logs) | 3 no running real node / cannot run
# Idempotent: a healthy worker is reused; anything else is stopped and started afresh.
# Env: REAL_NODE_WORKER_NAME (<node>-2), REAL_NODE_WORKER_IP, REAL_NODE_WORKER_HOST_IP,
#      REAL_NODE_WORKER_POD_CIDR, REAL_NODE_WORKER_VETH,
#      REAL_NODE_WORKER_BRIDGE, REAL_NODE_START_TIMEOUT (180 s).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ACTION="${1:-}"
case "$ACTION" in start | stop) ;; *) rn_die 2 "usage: worker.sh start|stop" ;; esac
[ "$(id -u)" -eq 0 ] || rn_skip "worker.sh must run as root"
for t in unshare nsenter ip; do
  command -v "$t" >/dev/null 2>&1 || rn_skip "'$t' is missing (apt-get install util-linux iproute2)"
done
TIMEOUT="${REAL_NODE_START_TIMEOUT:-180}"
W_NAME="$(rn_worker_name)"
WS="$RN_WORKER_STATE"
WR="$RN_WORKER_RUN"
# The node's mount and network namespaces are held by a process of their own (ns-holder.pid).
holder_ns() { # holder_ns: sets MNT_NS and NET_NS from a live holder; 1 without one
  local pid
  pid="$(kr_live_pid "$WS/ns-holder.pid")" || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ] || return 1
  MNT_NS="/proc/$pid/ns/mnt"
  NET_NS="/proc/$pid/ns/net"
}
MNT_NS="" NET_NS=""
holder_ns || true
KCFG="$RN_STATE/kubeconfig"
MP_NAMESPACE="${REAL_NODE_MOUNTPOINT_NAMESPACE:-mount-s3}"
kc() { "$KR_BIN/kubectl" --kubeconfig "$KCFG" --request-timeout=10s "$@"; }
# Run a command inside the worker's namespaces.
in_node() { nsenter --mount="$MNT_NS" --net="$NET_NS" -- "$@"; }
in_net() { nsenter --net="$NET_NS" -- "$@"; }
w_ctr() { ctr --address "$WR/containerd.sock" -n k8s.io "$@"; }
alive() { kr_live_pid "$WS/$1.pid" >/dev/null; }
stop_one() { kr_stop_pidfile "$1" "$WS/$1.pid" 20 rn_log || rm -f "$WS/$1.pid"; }

# ---- stop ---------------------------------------------------------------------------------------
stop_worker() {
  if [ -s "$KCFG" ] && alive kubelet && kc get node "$W_NAME" >/dev/null 2>&1; then
    # Pods go while the kubelet can tear them down: workloads (and the driver's Deployments'
    # pods, which come back on the other node) first, then the Mountpoint Pods, which the
    # controller releases once their workloads are gone (deleted when they are not); the node
    # plugin (a DaemonSet pod) outlives them all and goes with the node.
    local deadline=$(($(date +%s) + 90)) p
    pods_on() { # pods_on workloads|mountpoint|all
      kc get pods -A --field-selector "spec.nodeName=$W_NAME" \
        -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.ownerReferences[0].kind}{"\n"}{end}' 2>/dev/null |
        awk -v want="$1" -v mp="$MP_NAMESPACE" 'NF {
          split($1, a, "/"); ds = ($2 == "DaemonSet"); m = (a[1] == mp)
          if (want == "all" || (want == "workloads" && !ds && !m) || (want == "mountpoint" && m)) print $1 }'
    }
    for p in $(pods_on workloads); do kc -n "${p%%/*}" delete pod "${p#*/}" --wait=false >/dev/null 2>&1 || true; done
    while [ -n "$(pods_on workloads)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
    local released=$(($(date +%s) + 30))
    while [ -n "$(pods_on mountpoint)" ] && [ "$(date +%s)" -lt "$released" ]; do sleep 0.5; done
    for p in $(pods_on mountpoint); do kc -n "${p%%/*}" delete pod "${p#*/}" --wait=false >/dev/null 2>&1 || true; done
    while [ -n "$(pods_on mountpoint)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
  fi
  stop_one kube-proxy
  stop_one kubelet
  if alive containerd; then
    for t in $(w_ctr tasks ls -q 2>/dev/null); do w_ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    for _ in $(seq 50); do
      [ -z "$(w_ctr tasks ls -q 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop_one containerd
  for p in $(pgrep -f "containerd-shim-runc-v2 .*$WR/containerd.sock" || true); do kill -KILL "$p" 2>/dev/null || true; done
  # The node is gone: so are the pods still bound to it (the DaemonSet's: nothing recreates them).
  if [ -s "$KCFG" ]; then
    kc delete node "$W_NAME" --wait=false >/dev/null 2>&1 || true
    { kc get pods -A --field-selector "spec.nodeName=$W_NAME" \
      -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}' 2>/dev/null || true; } |
      while read -r p; do
        [ -n "$p" ] && kc -n "${p%%/*}" delete pod "${p#*/}" --grace-period=0 --force >/dev/null 2>&1 || true
      done
  fi
  # cgroups of its pods
  local m
  for m in $(findmnt -rn -t cgroup,cgroup2 -o TARGET); do
    [ -d "$m/$RN_WORKER_CGROUP" ] || continue
    for _ in 1 2 3; do
      find "$m/$RN_WORKER_CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do
        kill -KILL "$pid" 2>/dev/null || true
      done
      find "$m/$RN_WORKER_CGROUP" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [ -d "$m/$RN_WORKER_CGROUP" ] || break
      sleep 0.5
    done
  done
  # The namespaces go with their last process (the holder is the last one): every mount of the
  # node (FUSE sources and targets included) goes with its mount namespace.
  kr_stop_pidfile sleep "$WS/ns-holder.pid" 5 rn_log || true
  MNT_NS="" NET_NS=""
  # Namespace files bound under the run dir by an earlier layout of this script.
  findmnt -rn -o TARGET | awk -v w="$WR/" 'index($0, w) == 1 { print length($0) " " $0 }' |
    sort -rn | cut -d" " -f2- | while read -r m; do umount -l "$(printf "%b" "$m")" 2>/dev/null || true; done
  # The veth pair and the route go with the network namespace; a leftover host end too.
  ip link delete "$RN_WORKER_VETH" 2>/dev/null || true
  rm -rf "$WR" "$WS/env"
  rm -f "$WS"/*.pid
}

if [ "$ACTION" = stop ]; then
  [ -d "$WS" ] || [ -d "$WR" ] || exit 0
  if [ -z "${REAL_NODE_STOP_NOLOCK:-}" ]; then
    mkdir -p "$RN_STATE"
    exec 8>"$RN_STATE/.lock"
    flock -w 300 8 || rn_die 1 "another start/stop holds $RN_STATE/.lock"
  fi
  T0=$(date +%s%N)
  stop_worker
  rn_log "worker $W_NAME stopped in $((($(date +%s%N) - T0) / 1000000)) ms"
  exit 0
fi

# ---- start ------------------------------------------------------------------------------------
[ -s "$RN_STATE/env" ] || rn_skip "no running real node ($RN_STATE/env missing): run start.sh first"
set -a
# shellcheck disable=SC1091
. "$RN_STATE/env"
set +a
APISERVER_URL="https://$REAL_NODE_IP:$RN_APISERVER_PORT"
kc get --raw /readyz >/dev/null 2>&1 || rn_die 1 "the real node's kube-apiserver does not answer ($APISERVER_URL)"
CNI_BIN=""
for d in /usr/lib/cni /opt/cni/bin; do
  if [ -x "$d/bridge" ]; then
    CNI_BIN="$d"
    break
  fi
done
[ -n "$CNI_BIN" ] || rn_skip "CNI plugins not found (apt-get install containernetworking-plugins)"

exec 8>"$RN_STATE/.lock"
flock -w "$((TIMEOUT + 120))" 8 || rn_die 1 "another start/stop holds $RN_STATE/.lock"
T_BEGIN=$(date +%s%N)
elapsed() { echo "$((($(date +%s%N) - T_BEGIN) / 1000000))ms"; }
node_ready() {
  [ "$(kc get node "$W_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
write_env() {
  cat >"$WS/env.tmp" <<ENV
REAL_NODE_WORKER_NAME=$W_NAME
REAL_NODE_WORKER_IP=$RN_WORKER_IP
REAL_NODE_WORKER_CONTAINERD_ADDRESS=$WR/containerd.sock
REAL_NODE_WORKER_STATE=$WS
ENV
  mv "$WS/env.tmp" "$WS/env"
  cat "$WS/env"
}

if holder_ns && alive containerd && alive kubelet && alive kube-proxy && node_ready; then
  rn_log "worker $W_NAME already running; reusing it"
  write_env
  exit 0
fi
if [ -d "$WR" ] || ls "$WS"/*.pid >/dev/null 2>&1 || ip link show "$RN_WORKER_VETH" >/dev/null 2>&1; then
  stop_worker
fi
if ip route show | grep -qF "${RN_WORKER_POD_CIDR%/*}"; then
  rn_die 1 "pod subnet $RN_WORKER_POD_CIDR is already routed on this machine (set REAL_NODE_WORKER_POD_CIDR)"
fi

rm -rf "$WS/logs" "$WS/kubelet" "$WS/containerd" "$WS/cni" "$WS/pod-logs" "$WS/manifests" "$WS/pki" "$WS"/*.yaml "$WS"/*.kubeconfig
mkdir -p "$WS"/{logs,kubelet,containerd,cni/net.d,cni/ipam,pod-logs,manifests,pki} "$WR"
chmod 700 "$WS/pki"

DEADLINE=$(($(date +%s) + TIMEOUT))
launch() { # launch NAME BIN ARGS...: inside the node's namespaces, detached, no inherited fd
  local name="$1"
  shift
  (
    rn_close_fds
    exec nsenter --mount="$MNT_NS" --net="$NET_NS" -- setsid "$@" </dev/null >"$WS/logs/$name.log" 2>&1
  ) &
  echo $! >"$WS/$name.pid"
}
fail() { # fail NAME MESSAGE
  tail -n 40 "$WS/logs/$1.log" >&2 2>/dev/null || true
  stop_worker >&2 || true
  rn_die 1 "$2 (log: $WS/logs/$1.log)"
}
wait_for() { # wait_for NAME CHECK...
  local name="$1"
  shift
  while ! "$@"; do
    alive "$name" || fail "$name" "$name exited during startup"
    [ "$(date +%s)" -lt "$DEADLINE" ] || fail "$name" "$name not ready within ${TIMEOUT}s"
    sleep 0.2
  done
}

# ---- PKI: the kubelet's serving and client certificates, signed by the cluster CA -------------------
PKI="$WS/pki"
cp "$RN_STATE/pki/ca.crt" "$PKI/ca.crt"
cp "$RN_STATE/pki/ca.key" "$PKI/ca.key"
rn_cert "$PKI" kubelet-serving "/CN=$W_NAME" "$RN_SERVER_EXT
subjectAltName=IP:$RN_WORKER_IP,DNS:$W_NAME"
rn_cert "$PKI" kubelet "/O=system:nodes/CN=system:node:$W_NAME" "$RN_CLIENT_EXT"
rm -f "$PKI/ca.key" "$PKI/ca.srl"
rn_kubeconfig "$WS/kubelet.kubeconfig" "$PKI" kubelet "$APISERVER_URL"
cp "$RN_STATE/kube-proxy.kubeconfig" "$WS/kube-proxy.kubeconfig"

# ---- namespaces: held by a process of their own ------------------------------------------------------
# Not bound to files (`unshare --mount=FILE`): the kernel refuses to bind a mount namespace's file
# (EINVAL) when the caller's own mount namespace has the higher id, and since Linux 6.18 namespace
# ids come from per-CPU batches, so a newer namespace can have the lower one — measured: every time
# the caller's namespace and the new one were made on different CPUs. Every mount private inside.
(
  rn_close_fds
  exec setsid unshare --mount --net --propagation private sleep infinity </dev/null >/dev/null 2>&1
) &
echo $! >"$WS/ns-holder.pid"
until holder_ns; do
  kill -0 "$(cat "$WS/ns-holder.pid")" 2>/dev/null || rn_die 1 "the process holding the node's namespaces (unshare --mount --net) exited"
  [ "$(date +%s)" -lt "$DEADLINE" ] || rn_die 1 "the node's namespaces were not made within ${TIMEOUT}s"
  sleep 0.05
done

# ---- network: a veth pair to the host; the host routes the node's pod subnet to it ------------------
ip link add "$RN_WORKER_VETH" type veth peer name eth0 netns "$NET_NS"
ip addr add "$RN_WORKER_HOST_IP/30" dev "$RN_WORKER_VETH"
ip link set "$RN_WORKER_VETH" up
in_net ip link set lo up
in_net ip addr add "$RN_WORKER_IP/30" dev eth0
in_net ip link set eth0 up
in_net ip route add default via "$RN_WORKER_HOST_IP"
ip route add "$RN_WORKER_POD_CIDR" via "$RN_WORKER_IP"
sysctl -qw net.ipv4.ip_forward=1
in_net sysctl -qw net.ipv4.ip_forward=1

# ---- mount namespace -------------------------------------------------------------------------------
# Inside: drop the copies of the first node's mounts (its kubelet root, containers, network
# namespaces) — a copy would keep their FUSE connections and overlays alive — then bind the
# node's own kubelet dir (shared: Bidirectional mount propagation within the node) and give it
# private /run/netns and /var/log/containers.
mkdir -p /var/log/containers /run/netns
nsenter --mount="$MNT_NS" -- bash -euc '
  k="$1" s="$2" r="$3" ws="$4"
  findmnt -rn -o TARGET | awk -v k="$k" -v s="$s/" -v r="$r" -v ws="$ws" "
    (index(\$0, k) == 1 || index(\$0, s) == 1 || index(\$0, r) == 1 || index(\$0, \"/run/netns/\") == 1 ||
     index(\$0, \"/run/containerd\") == 1) && index(\$0, ws) != 1 { print length(\$0) \" \" \$0 }" |
    sort -rn | cut -d" " -f2- | while read -r m; do umount -l "$(printf "%b" "$m")" 2>/dev/null || true; done
  if findmnt -rn -o TARGET | grep -qxF "$k"; then
    echo "the first node'"'"'s $k is still mounted in the second node'"'"'s namespace" >&2
    exit 1
  fi
  mount --bind "$ws/kubelet" "$k"
  mount --make-rshared "$k"
  mount -t tmpfs -o mode=0755,size=16m s3csi-worker-netns /run/netns
  mount -t tmpfs -o mode=0755,size=16m s3csi-worker-logs /var/log/containers
' _ "$RN_KUBELET_ROOT" "$RN_STATE" "$RN_RUN" "$WS" || fail kubelet "could not prepare the second node's mount namespace"

# ---- cgroup root of its pods ------------------------------------------------------------------------
for m in $(findmnt -rn -t cgroup,cgroup2 -o TARGET); do mkdir -p "$m/$RN_WORKER_CGROUP"; done

# ---- containerd ---------------------------------------------------------------------------------------
rn_containerd_config "$WS/containerd/config.toml" "$WS" "$WR" "$CNI_BIN"
rn_cni_conflist "$WS/cni" "$RN_CNI_NETWORK-2" "$RN_WORKER_BRIDGE" "$RN_WORKER_POD_CIDR"
launch containerd containerd --config "$WS/containerd/config.toml"
ctr_ok() { w_ctr version >/dev/null 2>&1; }
wait_for containerd ctr_ok
for a in "$RN_IMAGES"/*.oci.tar ${REAL_NODE_IMPORT:-}; do
  w_ctr images import --all-platforms "$a" >>"$WS/logs/import.log" 2>&1 || fail import "ctr images import $a failed"
done
w_ctr images label "$RN_PAUSE_IMAGE" io.cri-containerd.pinned=pinned >/dev/null
rn_log "worker containerd up, images imported ($(elapsed))"

# ---- kubelet, kube-proxy -------------------------------------------------------------------------------
rn_kubelet_config "$WS" "$RN_WORKER_IP" "$WR/containerd.sock" "/$RN_WORKER_CGROUP"
rn_kubelet_cmd "$W_NAME" "$RN_WORKER_IP" "$WS"
launch kubelet "${RN_KUBELET_CMD[@]}"
wait_for kubelet node_ready
rn_log "kubelet: node $W_NAME Ready ($(elapsed))"
launch kube-proxy "$KR_BIN/kube-proxy" \
  --kubeconfig="$WS/kube-proxy.kubeconfig" --hostname-override="$W_NAME" \
  --proxy-mode=iptables --cluster-cidr="$RN_WORKER_POD_CIDR" \
  --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
  --iptables-localhost-nodeports=false \
  --metrics-bind-address="127.0.0.1:$RN_PROXY_METRICS_PORT" --healthz-bind-address="127.0.0.1:$RN_PROXY_HEALTHZ_PORT"
proxy_ok() { in_node curl -s --max-time 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$RN_PROXY_HEALTHZ_PORT/healthz" 2>/dev/null | grep -q 200; }
wait_for kube-proxy proxy_ok
rn_log "worker $W_NAME up in $(elapsed)"
write_env
