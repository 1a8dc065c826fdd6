#!/usr/bin/env bash
# Stop the cluster started by tests/testbed/services/s3/rgw_start.sh. Idempotent.
#
#   tests/testbed/services/s3/rgw_stop.sh           # stop the daemons, keep $S3_STATE_DIR (logs)
#   tests/testbed/services/s3/rgw_stop.sh --purge   # stop and remove $S3_STATE_DIR
#
# Only processes named in $S3_STATE_DIR/run/*.pid are signalled, and only when
# they are ceph binaries running with this state dir's ceph.conf. One after
# the other (radosgw, osd, mon) each gets SIGTERM, then SIGKILL after
# RGW_STOP_TIMEOUT seconds (default 3). Takes ~0.7 s normally.
set -euo pipefail

STATE_DIR="${S3_STATE_DIR:-/var/tmp/s3csi-rgw}"
STOP_TIMEOUT="${RGW_STOP_TIMEOUT:-3}"
CONF="$STATE_DIR/ceph.conf"
RUN_DIR="$STATE_DIR/run"
LOCK_FILE="${STATE_DIR%/}.lock"
DAEMONS=(radosgw osd mon)
PURGE=0
# shellcheck source=rgw_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/rgw_lib.sh"

log() { printf '[rgw_stop] %s\n' "$*" >&2; }
die() { printf 'rgw_stop: ERROR: %s\n' "$*" >&2; exit 1; }

usage() { echo "usage: $0 [--purge]" >&2; exit 2; }

# One daemon at a time, radosgw -> osd -> mon (measured on Ceph 16):
# in order all three are gone in ~0.7 s; TERMed together, the OSD waits 5 s
# for the vanished mon and radosgw + OSD can hang for 120 s.
stop_one() {
  local name="$1" pid="$2"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$(($(date +%s) + STOP_TIMEOUT))
  while alive "$pid" && (($(date +%s) < deadline)); do sleep 0.05; done
  if alive "$pid"; then
    log "$name ($pid) still running after ${STOP_TIMEOUT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && die "$name ($pid) survived SIGKILL"
  fi
  return 0
}

stop_daemons() {
  local d pid stopped=()
  for d in "${DAEMONS[@]}"; do
    pid=$(cat "$RUN_DIR/$d.pid" 2>/dev/null || true)
    is_ours "$pid" || continue
    stop_one "$d" "$pid"
    stopped+=("$d:$pid")
  done
  for pid in $(ours_by_scan); do
    log "daemon $pid ($(readlink "/proc/$pid/exe" 2>/dev/null)) has no pid file: stopping it too"
    stop_one stray "$pid"
    stopped+=("stray:$pid")
  done
  if ((${#stopped[@]})); then log "stopped ${stopped[*]}"; else log "no daemon running (state dir $STATE_DIR)"; fi
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
    return 0
  fi
  [[ -e "$STATE_DIR/.s3csi-rgw" || -z "$(ls -A "$STATE_DIR")" ]] ||
    die "$STATE_DIR was not made by rgw_start.sh (no .s3csi-rgw marker); not touching it"
  { exec 9>>"$LOCK_FILE"; } 2>/dev/null || die "cannot write $LOCK_FILE (wrong user?)"
  flock -w 120 9 || die "another rgw_start/rgw_stop holds $LOCK_FILE for over 120 s"
  stop_daemons
  rm -f "$RUN_DIR"/*.pid "$STATE_DIR/env"
  if ((PURGE)); then
    rm -rf "$STATE_DIR"
    rm -f "$LOCK_FILE"
    log "removed $STATE_DIR"
  fi
}

main "$@"
