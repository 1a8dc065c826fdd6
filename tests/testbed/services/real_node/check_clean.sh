#!/usr/bin/env bash
# Is the host as it was before start.sh? Lists what a real node left behind.
#
# Usage: check_clean.sh            compare with <state>/baseline (start.sh records it)
#        check_clean.sh --record DIR   record a baseline into DIR (start.sh does this)
#   exit 0 clean | 1 leftovers (one line each on stdout) | 3 cannot check (not root)
#
# Checked: our processes (containerd and its shims, etcd, control plane,
# kubelet, kube-proxy, the second node's); mounts under the kubelet root, our state and run dirs,
# /run/netns and /run/containerd; CNI network namespaces; the bridge and its
# veths, the second node's veth; iptables/ip6tables rules and chains named KUBE-* or CNI-*, and nftables
# tables that were not there before; kubepods cgroups in every hierarchy; the
# sysctls the kubelet, kube-proxy and the bridge plugin change; host paths the
# kubelet, containerd and CNI create (/var/lib/kubelet, /var/lib/cni,
# /var/log/pods, /var/log/containers, /run/containerd, ...). Without a
# baseline, sysctls and host paths are not compared (said on stderr).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" -eq 0 ] || rn_skip "check_clean.sh must run as root"

# ---- probes (each prints one item per line, sorted) ------------------------------------------
our_procs() { # pid and command of processes whose command line names our state or run dir
  local p cmd
  for p in /proc/[0-9]*; do
    cmd="$( (tr '\0' ' ' <"$p/cmdline") 2>/dev/null || true)"
    [ -n "$cmd" ] || continue
    case "$cmd" in
    *"$RN_STATE"* | *"$RN_RUN"*) ;;
    *) continue ;;
    esac
    case "$cmd" in *check_clean.sh* | *stop.sh* | *start.sh*) continue ;; esac
    echo "process ${p#/proc/}: ${cmd:0:160}"
  done
}
our_mounts() {
  findmnt -rn -o TARGET 2>/dev/null | awk -v k="$RN_KUBELET_ROOT" -v s="$RN_STATE" -v r="$RN_RUN" '
    index($0, k) == 1 || index($0, s "/") == 1 || index($0, r) == 1 ||
    index($0, "/run/netns/cni-") == 1 || index($0, "/run/containerd") == 1 { print "mount " $0 }' | sort -u
}
netns_list() {
  local f
  for f in /run/netns/cni-*; do
    if [ -e "$f" ]; then echo "netns ${f#/run/netns/}"; fi
  done | sort
}
links() {
  ip -o link show 2>/dev/null | awk -F': ' -v b="$RN_BRIDGE" -v w="$RN_WORKER_VETH" '{ n = $2; sub(/@.*/, "", n) }
    n == b || n == w || $0 ~ (" master " b " ") { print "link " n }' | sort
}
ipt_rules() { # KUBE-*/CNI-* chains and rules, v4 and v6
  local t
  for t in iptables-save ip6tables-save; do
    "$t" 2>/dev/null | grep -E '(^:|-[AjgI] |--jump |--goto )(KUBE-|CNI-)|-j (KUBE-|CNI-)' |
      sed -E "s/\[[0-9]+:[0-9]+\]//; s/^/$t: /" || true
  done | sort -u
}
nft_tables() { nft list tables 2>/dev/null | sort || true; }
cgroups() {
  local m
  for m in $(findmnt -rn -t cgroup,cgroup2 -o TARGET); do
    find "$m" -maxdepth 2 -type d \( -name 'kubepods*' -o -name "$RN_WORKER_CGROUP" \) 2>/dev/null |
      sed 's/^/cgroup /'
  done | sort -u
}
sysctls() {
  local k v
  for k in "${RN_SYSCTLS[@]}"; do
    v="$(sysctl -n "$k" 2>/dev/null)" || continue
    printf '%s = %s\n' "$k" "$(echo "$v" | tr -s '[:space:]' ' ' | sed 's/ $//')"
  done
}
host_paths() {
  local p
  for p in "${RN_HOST_PATHS[@]}"; do
    if [ -e "$p" ] || [ -L "$p" ]; then echo "exists $p"; fi
  done
}

# ---- record ---------------------------------------------------------------------------------------
if [ "${1:-}" = --record ]; then
  dir="${2:?usage: check_clean.sh --record DIR}"
  mkdir -p "$dir"
  nft_tables >"$dir/nft_tables"
  sysctls >"$dir/sysctls"
  host_paths >"$dir/host_paths"
  netns_list >"$dir/netns"
  links >"$dir/links"
  ipt_rules >"$dir/iptables"
  our_mounts >"$dir/mounts"
  cgroups >"$dir/cgroups"
  exit 0
fi

# ---- compare ----------------------------------------------------------------------------------
B="$RN_STATE/baseline"
left="$(mktemp)"
trap 'rm -f "$left"' EXIT
new_lines() { # new_lines BASELINE-FILE CURRENT...: lines now that were not in the baseline
  local base="$1"
  shift
  if [ -f "$base" ]; then
    comm -13 "$base" <("$@" | sort)
  else
    "$@"
  fi
}
{
  our_procs
  new_lines "$B/mounts" our_mounts
  new_lines "$B/netns" netns_list
  new_lines "$B/links" links
  new_lines "$B/iptables" ipt_rules
  new_lines "$B/cgroups" cgroups
  if [ -d "$RN_RUN" ]; then echo "dir $RN_RUN"; fi
  if [ -d "$B" ]; then
    comm -13 "$B/nft_tables" <(nft_tables) | sed 's/^/nftables new /'
    diff <(cat "$B/sysctls") <(sysctls) | sed -n 's/^> /sysctl changed: /p' || true
    comm -13 "$B/host_paths" <(host_paths) | sed 's/^exists /created /'
  else
    rn_log "no baseline in $B: sysctls, nftables tables and host paths not compared"
  fi
} >>"$left"
if [ -s "$left" ]; then
  cat "$left"
  exit 1
fi
exit 0
