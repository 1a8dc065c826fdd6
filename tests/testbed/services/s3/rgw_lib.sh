# shellcheck shell=bash
# Shared by rgw_start.sh and rgw_stop.sh (sourced; both set CONF, the state dir's ceph.conf, first).
# Which processes are ours: a pid counts only if it is a ceph binary using *our* ceph.conf (same
# path in its argv, same file through its root), so a recycled pid or someone else's cluster — one
# in a chroot with the same paths included — is never signalled.

is_ours() {
  local pid="$1" a exe found=0
  local -a args=()
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # argv via a builtin (no fork per process when scanning /proc); not
  # /proc/PID/comm: Ceph 18's radosgw renames its main thread "notif-worker0".
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  for a in "${args[@]}"; do [[ "$a" == "$CONF" ]] && { found=1; break; }; done
  ((found)) || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  case "${exe##*/}" in ceph-mon|ceph-osd|radosgw) ;; *) return 1;; esac
  same_root "$pid"
}

# same_root PID: the process sees our ceph.conf as the very file we see (same device and inode
# through its root), so a cluster with the same paths in a chroot or another mount namespace (the
# fresh Debian check runs one) is not ours. Without our ceph.conf, its root must be ours.
same_root() {
  local pid="$1" mine theirs
  mine=$(stat -Lc %d:%i "$CONF" 2>/dev/null) || mine=""
  if [[ -n "$mine" ]]; then
    theirs=$(stat -Lc %d:%i "/proc/$pid/root$CONF" 2>/dev/null) || return 1
    [[ "$mine" == "$theirs" ]]
  else
    [[ "$(readlink "/proc/$pid/root" 2>/dev/null)" == "$(readlink /proc/self/root)" ]]
  fi
}

# alive PID...: true while any PID is a live (not zombie) process. Used for
# "did our fresh child die"; is_ours decides what may be signalled.
alive() {
  local p st
  for p in "$@"; do
    st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1) || true
    [[ -n "$st" && "$st" != Z ]] && return 0
  done
  return 1
}

# ours_by_scan: pids of ceph daemons whose argv names this state dir's
# ceph.conf, for daemons whose pid file was lost; in stop order (radosgw, osd, mon).
ours_by_scan() {
  local d kind pid
  for kind in radosgw ceph-osd ceph-mon; do
    for d in /proc/[0-9]*; do
      pid="${d#/proc/}"
      if is_ours "$pid" && [[ "$(readlink "$d/exe" 2>/dev/null)" == */"$kind" ]]; then echo "$pid"; fi
    done
  done
}
