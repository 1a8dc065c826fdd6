# shellcheck shell=bash disable=SC2034 # variables are used by the sourcing scripts
# Shared settings of tests/testbed/services/real_node/*.sh. Sourced, not run.
# Test tier only: a real single-node Kubernetes (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy) on containerd.

RN_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RN_REPO="$(cd "$RN_HERE/../../../.." && pwd)"
# The kube_real tier owns the Go module and the binary cache; we reuse both.
RN_KUBE_REAL_DIR="${REAL_NODE_KUBE_REAL_DIR:-$RN_HERE/../kube_real}"
# shellcheck source=../kube_real/lib.sh
. "$RN_KUBE_REAL_DIR/lib.sh"

RN_STATE="${REAL_NODE_STATE:-/var/tmp/s3csi-real-node}"
RN_RUN="${REAL_NODE_RUN:-/run/s3csi-real-node}"
RN_CACHE="${REAL_NODE_CACHE:-$KR_CACHE/$KR_KUBE_VERSION/real-node}"
RN_IMAGES="$RN_CACHE/images"
# stop.sh deletes what is under the state and run dirs: refuse anything but a
# dedicated absolute dir at least two levels deep.
for _d in "$RN_STATE" "$RN_RUN" "$RN_CACHE"; do
  case "$_d" in
  /*/*[!/]*) ;;
  *)
    printf 'real_node: ERROR: %s must be an absolute dir at least two levels deep\n' "$_d" >&2
    exit 1
    ;;
  esac
  case "$_d" in *..* | *" "*)
    printf 'real_node: ERROR: %s must not contain ".." or spaces\n' "$_d" >&2
    exit 1
    ;;
  esac
done
unset _d
RN_KUBELET_ROOT=/var/lib/kubelet # CSI manifests hard-code it

# Network: a bridge, a pod subnet and the service range (loopback-free: pods
# reach the apiserver through the node's address).
RN_BRIDGE="${REAL_NODE_BRIDGE:-s3csi0}"
RN_POD_CIDR="${REAL_NODE_POD_CIDR:-10.244.0.0/24}"
RN_SERVICE_CIDR="${REAL_NODE_SERVICE_CIDR:-10.96.0.0/16}"
RN_CNI_NETWORK=s3csi-real-node

# Ports, away from the defaults (and from the kube_real tier's), so both tiers
# and a real cluster's habits do not collide.
RN_ETCD_PORT="${REAL_NODE_ETCD_PORT:-24790}"
RN_ETCD_PEER_PORT="${REAL_NODE_ETCD_PEER_PORT:-24800}"
RN_APISERVER_PORT="${REAL_NODE_APISERVER_PORT:-27443}"
RN_KCM_PORT="${REAL_NODE_KCM_PORT:-27257}"
RN_SCHEDULER_PORT="${REAL_NODE_SCHEDULER_PORT:-27259}"
RN_KUBELET_PORT="${REAL_NODE_KUBELET_PORT:-27250}"
RN_KUBELET_HEALTHZ_PORT="${REAL_NODE_KUBELET_HEALTHZ_PORT:-27248}"
RN_PROXY_METRICS_PORT="${REAL_NODE_PROXY_METRICS_PORT:-27249}"
RN_PROXY_HEALTHZ_PORT="${REAL_NODE_PROXY_HEALTHZ_PORT:-27256}"

# Images of the testbed (pause + sidecar stand-ins), fully qualified (CRI
# reads an unqualified name as docker.io/...).
RN_IMAGE_PREFIX=localhost/s3csi-testbed
RN_PAUSE_IMAGE="$RN_IMAGE_PREFIX/pause:3.10"

# The control plane and node processes, in start order; stop goes backwards.
RN_PROCS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

# Sysctls that kubelet (setupKernelTunables), kube-proxy or the bridge plugin
# may change: recorded before start and restored by stop.
RN_SYSCTLS=(
  net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables
)

# Host paths the kubelet, containerd, CNI or iptables create outside our state
# dir; the baseline records which existed, stop removes the others.
RN_HOST_PATHS=(
  "$RN_KUBELET_ROOT" /var/lib/cni /var/log/pods /var/log/containers /run/containerd
  /run/netns /run/xtables.lock /etc/cni /opt/cni
)

# Debian packages (the same names on Debian 12 and 13).
RN_PACKAGES=(containerd runc containernetworking-plugins iptables nftables conntrack socat ethtool
  ebtables iproute2 openssl curl util-linux procps gcc libc6-dev busybox-static)

rn_log() { printf 'real_node: %s\n' "$*" >&2; }
rn_die() { # rn_die CODE MESSAGE...
  local code="$1"
  shift
  printf 'real_node: ERROR: %s\n' "$*" >&2
  exit "$code"
}
# Exit code 3: this machine cannot run a real node (reason given); callers skip.
rn_skip() {
  printf 'real_node: SKIP: %s\n' "$*" >&2
  exit 3
}

rn_ctr() { ctr --address "$RN_RUN/containerd.sock" -n k8s.io "$@"; }

# The node's address: the source address of the default route (not loopback:
# pods reach the apiserver through the kubernetes Service, i.e. this address).
rn_node_ip() {
  if [ -n "${REAL_NODE_IP:-}" ]; then
    echo "$REAL_NODE_IP"
    return 0
  fi
  ip -4 route get 1.1.1.1 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "src") { print $(i + 1); exit } }'
}

# Node name: lower-case hostname unless REAL_NODE_NAME is set.
rn_node_name() { echo "${REAL_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}"; }

# The kubelet's command line (start.sh, kubelet.sh) in RN_KUBELET_CMD: rn_kubelet_cmd NAME IP.
rn_kubelet_cmd() {
  RN_KUBELET_CMD=("$KR_BIN/kubelet"
    --config="$RN_STATE/kubelet.yaml" --kubeconfig="$RN_STATE/kubelet.kubeconfig"
    --root-dir="$RN_KUBELET_ROOT" --cert-dir="$RN_STATE/pki/kubelet-certs"
    --hostname-override="$1" --node-ip="$2" --v="${REAL_NODE_KUBELET_V:-2}")
}
