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

# The second node (worker.sh): its own network namespace (a veth pair to the host, its own bridge
# and pod subnet, its own iptables for kube-proxy), its own mount namespace (where
# /var/lib/kubelet is its own dir) and containerd, kubelet and kube-proxy of its own.
RN_WORKER_STATE="$RN_STATE/worker"
RN_WORKER_RUN="$RN_RUN/worker"
RN_WORKER_VETH="${REAL_NODE_WORKER_VETH:-s3csiw0}"
RN_WORKER_HOST_IP="${REAL_NODE_WORKER_HOST_IP:-10.245.0.1}"
RN_WORKER_IP="${REAL_NODE_WORKER_IP:-10.245.0.2}"
RN_WORKER_POD_CIDR="${REAL_NODE_WORKER_POD_CIDR:-10.244.1.0/24}"
RN_WORKER_BRIDGE="${REAL_NODE_WORKER_BRIDGE:-s3csi1}"
RN_WORKER_CGROUP=s3csi-worker
RN_WORKER_PROCS=(containerd kubelet kube-proxy)

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

# Close every fd above 2 of this (sub)shell: a daemon must not inherit its caller's descriptors —
# `flock FILE start.sh` passes the lock's fd on, and a node left running would hold the lock.
rn_close_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd="${fd##*/}"
    if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

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

# The kubelet's command line (start.sh, kubelet.sh, worker.sh) in RN_KUBELET_CMD:
# rn_kubelet_cmd NAME IP [STATE] (STATE: where its config, kubeconfig and certs are).
rn_kubelet_cmd() {
  local state="${3:-$RN_STATE}"
  RN_KUBELET_CMD=("$KR_BIN/kubelet"
    --config="$state/kubelet.yaml" --kubeconfig="$state/kubelet.kubeconfig"
    --root-dir="$RN_KUBELET_ROOT" --cert-dir="$state/pki/kubelet-certs"
    --hostname-override="$1" --node-ip="$2" --v="${REAL_NODE_KUBELET_V:-2}")
}

# Name of the second node: the first one's with "-2".
rn_worker_name() { echo "${REAL_NODE_WORKER_NAME:-$(rn_node_name)-2}"; }

# ---- PKI and kubeconfigs (start.sh, worker.sh) ------------------------------------------------
RN_CLIENT_EXT=$'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
RN_SERVER_EXT=$'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth'
# An EC P-256 key (fast to make): rn_newkey FILE
rn_newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# A key and a certificate signed by PKI/ca: rn_cert PKI NAME SUBJECT EXTENSIONS
rn_cert() {
  local pki="$1" name="$2"
  rn_newkey "$pki/$name.key"
  openssl req -new -key "$pki/$name.key" -subj "$3" -out "$pki/$name.csr" 2>/dev/null
  printf '%s\n' "$4" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}
# A kubeconfig with a client certificate: rn_kubeconfig FILE PKI CERT-NAME APISERVER-URL
rn_kubeconfig() {
  cat >"$1" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: s3csi-real-node
  cluster:
    server: $4
    certificate-authority-data: $(base64 -w0 <"$2/ca.crt")
users:
- name: $3
  user:
    client-certificate-data: $(base64 -w0 <"$2/$3.crt")
    client-key-data: $(base64 -w0 <"$2/$3.key")
contexts:
- name: s3csi-real-node
  context:
    cluster: s3csi-real-node
    user: $3
    namespace: default
current-context: s3csi-real-node
KCFG
  chmod 600 "$1"
}

# ---- node configuration (start.sh, worker.sh) --------------------------------------------------
# containerd of a node: rn_containerd_config FILE STATE RUN CNI_BIN (root under STATE, sockets,
# state and runc under RUN, CNI configuration in STATE/cni/net.d).
rn_containerd_config() {
  local file="$1" state="$2" run="$3" cni_bin="$4"
  cat >"$file" <<TOML
version = 2
root = "$state/containerd/root"
state = "$run/containerd"
[grpc]
  address = "$run/containerd.sock"
[ttrpc]
  address = "$run/containerd.sock.ttrpc"
[debug]
  address = "$run/containerd-debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$RN_PAUSE_IMAGE"
  # This VM's capability bounding set lacks CAP_SYS_RESOURCE: without this,
  # runc cannot write oom_score_adj and every sandbox fails.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$run/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$state/cni/net.d"
    max_conf_num = 1
TOML
}

# The pod network of a node (a bridge): rn_cni_conflist DIR NETWORK BRIDGE SUBNET (DIR/net.d,
# IPAM state in DIR/ipam).
rn_cni_conflist() {
  cat >"$1/net.d/10-s3csi.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "$2",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$3",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$1/ipam",
        "ranges": [[{ "subnet": "$4" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    }
  ]
}
CNI
}

# A kubelet's configuration: rn_kubelet_config STATE IP CONTAINERD_SOCKET [CGROUP_ROOT] (writes
# STATE/kubelet.yaml; serving certificate in STATE/pki, logs in STATE/pod-logs).
rn_kubelet_config() {
  local state="$1"
  cat >"$state/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $2
port: $RN_KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $RN_KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RN_STATE/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $state/pki/kubelet-serving.crt
tlsPrivateKeyFile: $state/pki/kubelet-serving.key
containerRuntimeEndpoint: unix://$3
cgroupDriver: cgroupfs
${4:+cgroupRoot: $4}
failSwapOn: false
podLogsDir: $state/pod-logs
staticPodPath: $state/manifests
clusterDomain: cluster.local
# Local images only: never garbage-collect them; never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
serializeImagePulls: false
YAML
}
