#!/usr/bin/env bash
# Stop the cluster started by scripts/s3/rgw_start.sh. Idempotent.
#
#   scripts/s3/rgw_stop.sh           # stop the daemons, keep $S3_STATE_DIR (logs)
#   scripts/s3/rgw_stop.sh --purge   # stop and remove $S3_STATE_DIR
#
# Only processes named in $S3_STATE_DIR/run/*.pid are signalled, and only when
# they are ceph binaries running with this state dir's ceph.conf. They get
# SIGTERM, then SIGKILL after RGW_STOP_TIMEOUT seconds (default 3; the data is
# throwaway, and a TERMed OSD whose mon is gone lingers ~5 s).
set -euo pipefail

STATE_DIR="${S3_STATE_DIR:-/var/tmp/s3csi-rgw}"
STOP_TIMEOUT="${RGW_STOP_TIMEOUT:-3}"
CONF="$STATE_DIR/ceph.conf"
RUN_DIR="$STATE_DIR/run"
LOCK_FILE="${STATE_DIR%/}.lock"
DAEMONS=(radosgw osd mon)
PURGE=0

log() { printf '[rgw_stop] %s\n' "$*" >&2; }
die() { printf 'rgw_stop: ERROR: %s\n' "$*" >&2; exit 1; }

usage() { echo "usage: $0 [--purge]" >&2; exit 2; }

is_ours() {
  local pid="$1" exe
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  case "${exe##*/}" in ceph-mon|ceph-osd|radosgw) ;; *) return 1;; esac
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$CONF"
}

alive() { local p; for p in "$@"; do [[ -e /proc/$p ]] && return 0; done; return 1; }

stop_daemons() {
  local d pid pids=()
  for d in "${DAEMONS[@]}"; do
    pid=$(cat "$RUN_DIR/$d.pid" 2>/dev/null || true)
    if is_ours "$pid"; then pids+=("$pid"); fi
  done
  if ((${#pids[@]} == 0)); then
    log "no daemon running (state dir $STATE_DIR)"
    return 0
  fi
  log "stopping ${pids[*]} (SIGTERM, SIGKILL after ${STOP_TIMEOUT}s)"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$(($(date +%s) + STOP_TIMEOUT))
  while alive "${pids[@]}" && (($(date +%s) < deadline)); do sleep 0.1; done
  if alive "${pids[@]}"; then
    kill -KILL "${pids[@]}" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do alive "${pids[@]}" || break; sleep 0.1; done
    alive "${pids[@]}" && die "processes ${pids[*]} survived SIGKILL"
  fi
  log "stopped"
}

main() {
  case "${1:-}" in
    "") ;;
    --purge) PURGE=1 ;;
    *) usage ;;
  esac
  [[ "$STOP_TIMEOUT" =~ ^[0-9]+$ ]] || die "RGW_STOP_TIMEOUT must be a number"
  [[ "$STATE_DIR" == /* && "$STATE_DIR" != / ]] || die "S3_STATE_DIR must be an absolute path other than /"
  if [[ ! -d "$STATE_DIR" ]]; then
    log "nothing to stop ($STATE_DIR does not exist)"
    rm -f "$LOCK_FILE"
    return 0
  fi
  exec 9>"$LOCK_FILE"
  flock -w 120 9 || die "another rgw_start/rgw_stop holds $LOCK_FILE"
  stop_daemons
  rm -f "$RUN_DIR"/*.pid "$STATE_DIR/env"
  if ((PURGE)); then
    rm -rf "$STATE_DIR"
    rm -f "$LOCK_FILE"
    log "removed $STATE_DIR"
  fi
}

main "$@"
