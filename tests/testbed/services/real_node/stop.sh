#!/usr/bin/env bash
# Stop the real node started by start.sh and undo everything it did to the
# host, then verify that with check_clean.sh.
#
# Order: the second node, if any (worker.sh stop); controllers and scheduler
# stop (nothing recreates pods); pods are
# deleted, workloads before DaemonSet pods (a CSI node plugin must outlive the
# pods whose volumes it unpublishes), and the kubelet tears them down (volumes
# unmounted, sandboxes and their network removed); then kube-proxy, kubelet,
# apiserver, etcd; leftover containers and containerd; then cgroups, mounts,
# CNI network namespaces, the bridge, iptables chains and new nftables tables,
# sysctls and host paths that did not exist before.
#
# Usage: stop.sh [--purge]
#   --purge  also delete the state dir (etcd data, PKI, logs, baseline)
#   exit 0 stopped and clean | 1 something was left behind (listed on stdout)
# Env: REAL_NODE_DRAIN_TIMEOUT seconds for the pods to go (default 90),
#      REAL_NODE_STOP_TIMEOUT seconds per process (default 20).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0
[ "${1:-}" = --purge ] && PURGE=1
DRAIN_TIMEOUT="${REAL_NODE_DRAIN_TIMEOUT:-90}"
STOP_TIMEOUT="${REAL_NODE_STOP_TIMEOUT:-20}"
[ "$(id -u)" -eq 0 ] || rn_die 1 "stop.sh must run as root"
[ -d "$RN_STATE" ] || [ -d "$RN_RUN" ] || exit 0
mkdir -p "$RN_STATE"
if [ -z "${REAL_NODE_STOP_NOLOCK:-}" ]; then # start.sh calls us holding the lock
  exec 8>"$RN_STATE/.lock"
  flock -w 300 8 || rn_die 1 "another start/stop holds $RN_STATE/.lock"
fi
T0N=$(date +%s%N)
since() { echo "$((($(date +%s%N) - T0N) / 1000000)) ms"; }
KCFG="$RN_STATE/kubeconfig"
kc() { "$KR_BIN/kubectl" --kubeconfig "$KCFG" --request-timeout=10s "$@"; }

stop_one() { # stop_one NAME: SIGTERM, bounded wait, then SIGKILL (pid checked to be ours)
  kr_stop_pidfile "$1" "$RN_STATE/$1.pid" "$STOP_TIMEOUT" rn_log || rm -f "$RN_STATE/$1.pid"
}
alive() { kr_live_pid "$RN_STATE/$1.pid" >/dev/null; }

# ---- 0. the second node (worker.sh), if one runs: its pods, processes and namespaces ----------
if [ -d "$RN_WORKER_STATE" ] || [ -d "$RN_WORKER_RUN" ]; then
  REAL_NODE_STOP_NOLOCK=1 "$RN_HERE/worker.sh" stop || rn_log "worker.sh stop failed (check below)"
fi

# ---- 1. pods go while the kubelet can still tear them down ------------------------------------
if alive kube-apiserver && alive kubelet && [ -s "$KCFG" ]; then
  stop_one kube-controller-manager
  stop_one kube-scheduler
  deadline=$(($(date +%s) + DRAIN_TIMEOUT))
  pods_where() { # pods_where ds|other: ns/name of the DaemonSet-owned pods, or of the others
    kc get pods -A -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.ownerReferences[0].kind}{"\n"}{end}' 2>/dev/null |
      awk -v want="$1" 'NF { ds = ($2 == "DaemonSet"); if ((want == "ds") == ds) print $1 }'
  }
  delete_pods() { # delete_pods ns/name...
    local p
    for p in "$@"; do kc -n "${p%%/*}" delete pod "${p#*/}" --wait=false >/dev/null 2>&1 || true; done
  }
  wait_gone() { # wait_gone ds|other
    while [ -n "$(pods_where "$1")" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
  }
  for wave in other ds; do
    mapfile -t pods < <(pods_where "$wave")
    [ "${#pods[@]}" -eq 0 ] && continue
    rn_log "deleting ${#pods[@]} pod(s) ($wave)"
    delete_pods "${pods[@]}"
    wait_gone "$wave"
  done
  mapfile -t pods < <(
    pods_where other
    pods_where ds
  )
  if [ "${#pods[@]}" -gt 0 ]; then
    rn_log "pods still there after ${DRAIN_TIMEOUT}s: ${pods[*]}; removing them from the API"
    for p in "${pods[@]}"; do
      kc -n "${p%%/*}" delete pod "${p#*/}" --grace-period=0 --force >/dev/null 2>&1 || true
    done
  fi
  # The kubelet stops the sandboxes (CNI teardown) of pods it no longer has.
  while [ -n "$(rn_ctr tasks ls -q 2>/dev/null)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
  rn_log "pods gone ($(since))"
fi

# ---- 2. node and control plane processes ------------------------------------------------------
for ((i = ${#RN_PROCS[@]} - 1; i >= 1; i--)); do stop_one "${RN_PROCS[$i]}"; done
rn_log "node and control plane stopped ($(since))"

# ---- 3. containers, then containerd -------------------------------------------------------------
if alive containerd; then
  for t in $(rn_ctr tasks ls -q 2>/dev/null); do
    rn_ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  for _ in $(seq 50); do
    [ -z "$(rn_ctr tasks ls -q 2>/dev/null)" ] && break
    sleep 0.1
  done
  for t in $(rn_ctr tasks ls -q 2>/dev/null); do rn_ctr tasks delete -f "$t" >/dev/null 2>&1 || true; done
  for c in $(rn_ctr containers ls -q 2>/dev/null); do rn_ctr containers delete "$c" >/dev/null 2>&1 || true; done
fi
stop_one containerd
# Shims outlive containerd when tasks were not deleted.
for p in $(pgrep -f "containerd-shim-runc-v2 .*$RN_RUN/containerd.sock" || true); do kill -KILL "$p" 2>/dev/null || true; done
rn_log "containerd stopped ($(since))"

# ---- 4. cgroups: kill what is left in kubepods, remove them deepest first ------------------------
for m in $(findmnt -rn -t cgroup,cgroup2 -o TARGET); do
  [ -d "$m/kubepods" ] || continue
  for _ in 1 2 3; do
    find "$m/kubepods" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do
      kill -KILL "$pid" 2>/dev/null || true
    done
    find "$m/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$m/kubepods" ] || break
    sleep 0.5
  done
done

# ---- 5. mounts under the kubelet root, our dirs, CNI netns (deepest first, lazily if busy) --------
ours() {
  findmnt -rn -o TARGET 2>/dev/null | awk -v k="$RN_KUBELET_ROOT" -v s="$RN_STATE/" -v r="$RN_RUN" '
    index($0, k) == 1 || index($0, s) == 1 || index($0, r) == 1 || index($0, "/run/netns/cni-") == 1 ||
    index($0, "/run/containerd/") == 1' | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-
}
for _ in 1 2 3 4 5; do
  mapfile -t mnts < <(ours)
  [ "${#mnts[@]}" -eq 0 ] && break
  for m in "${mnts[@]}"; do
    m="$(printf '%b' "$m")" # findmnt -r escapes spaces as \x20
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
done

# ---- 6. network: CNI namespaces, IPAM state, the bridge and its veths ---------------------------
B="$RN_STATE/baseline"
for f in /run/netns/cni-*; do
  [ -e "$f" ] || continue
  ns="${f#/run/netns/}"
  grep -qx "netns $ns" "$B/netns" 2>/dev/null && continue
  ip netns delete "$ns" 2>/dev/null || rm -f "/run/netns/$ns"
done
for v in $(ip -o link show master "$RN_BRIDGE" 2>/dev/null | awk -F': ' '{ n = $2; sub(/@.*/, "", n); print n }'); do
  ip link delete "$v" 2>/dev/null || true
done
ip link delete "$RN_BRIDGE" 2>/dev/null || true
rm -rf "$RN_STATE/cni/ipam"

# ---- 7. iptables: KUBE-*/CNI-* chains and the rules jumping to them; new nftables tables -------------
strip_chains() { # strip_chains iptables|ip6tables: rewrite each table without our chains
  local cmd="$1" t saved
  for t in $("$cmd-save" 2>/dev/null | sed -n 's/^\*//p'); do
    saved="$("$cmd-save" -t "$t" 2>/dev/null)"
    grep -qE '(KUBE-|CNI-)' <<<"$saved" || continue
    grep -vE '^:(KUBE-|CNI-)|^-A (KUBE-|CNI-)|(-j|-g|--jump|--goto) (KUBE-|CNI-)' <<<"$saved" | "$cmd-restore" -T "$t" ||
      rn_log "$cmd-restore of table $t failed"
  done
}
strip_chains iptables
strip_chains ip6tables
if [ -f "$B/nft_tables" ]; then
  while read -r _ family name; do
    [ -n "$name" ] || continue
    grep -qx "table $family $name" "$B/nft_tables" && continue
    # Only a table that holds nothing but empty chains (iptables-nft's base chains).
    if ! nft list table "$family" "$name" 2>/dev/null | grep -qvE '^\s*(table|chain|type|policy|\}|$)'; then
      nft delete table "$family" "$name" 2>/dev/null || true
    fi
  done < <(nft list tables 2>/dev/null)
fi

# ---- 8. sysctls back to their recorded values ----------------------------------------------------
if [ -f "$B/sysctls" ]; then
  while IFS= read -r line; do
    k="${line%% = *}"
    v="${line#* = }"
    [ "$(sysctl -n "$k" 2>/dev/null | tr -s '[:space:]' ' ' | sed 's/ $//')" = "$v" ] && continue
    sysctl -qw "$k=$v" >/dev/null 2>&1 || rn_log "could not restore sysctl $k=$v"
  done <"$B/sysctls"
fi

# ---- 9. host paths created by the kubelet, containerd, CNI or iptables ---------------------------------
if [ -f "$B/host_paths" ]; then
  for p in "${RN_HOST_PATHS[@]}"; do
    grep -qx "exists $p" "$B/host_paths" && continue
    [ -e "$p" ] || [ -L "$p" ] || continue
    if [ -d "$p" ] && findmnt -rn -o TARGET | grep -q "^$p"; then
      rn_log "not removing $p: something is mounted under it"
      continue
    fi
    rm -rf "$p"
  done
else
  # No baseline (state purged?): remove only what is certainly ours.
  find /var/log/containers -maxdepth 1 -type l -lname "$RN_STATE/*" -delete 2>/dev/null || true
fi
rm -rf "$RN_RUN"
rm -f "$RN_STATE"/*.pid "$RN_STATE/env"

# ---- 10. verify -----------------------------------------------------------------------------------
rc=0
leftovers="$("$RN_HERE/check_clean.sh")" || rc=$?
if [ "$rc" -ne 0 ]; then
  printf '%s\n' "$leftovers"
  rn_die 1 "left behind after stop (above); logs in $RN_STATE/logs"
fi
if [ "$PURGE" -eq 1 ]; then
  find "$RN_STATE" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
  rn_log "removed $RN_STATE"
fi
rn_log "stopped and clean in $(since)"
