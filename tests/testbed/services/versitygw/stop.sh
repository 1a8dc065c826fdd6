#!/usr/bin/env bash
# Stop the server started by start.sh. Idempotent.
#
#   tests/testbed/services/versitygw/stop.sh           # stop, keep $VGW_STATE_DIR (log, data)
#   tests/testbed/services/versitygw/stop.sh --purge   # stop and remove $VGW_STATE_DIR
#
# Only the process in $VGW_STATE_DIR/versitygw.pid is signalled, and only when it is versitygw
# serving this state dir: SIGTERM, then SIGKILL after VGW_STOP_TIMEOUT seconds (default 5).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE_DIR="${VGW_STATE_DIR:-/var/tmp/s3csi-versitygw}"
STOP_TIMEOUT="${VGW_STOP_TIMEOUT:-5}"
PID_FILE="$STATE_DIR/versitygw.pid"
LOCK_FILE="${STATE_DIR%/}.lock"
PURGE=0
case "${1:-}" in
  "") ;;
  --purge) PURGE=1 ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac
[[ "$STOP_TIMEOUT" =~ ^[0-9]+$ ]] || vgw_die "VGW_STOP_TIMEOUT must be a number"
[[ "$STATE_DIR" == /* && "$STATE_DIR" != / ]] || vgw_die "VGW_STATE_DIR must be an absolute path other than /"
if [ ! -d "$STATE_DIR" ]; then
  vgw_log "nothing to stop ($STATE_DIR does not exist)"
  # A start that failed before making the state dir leaves only its lock file.
  if ((PURGE)); then rm -f "$LOCK_FILE"; fi
  exit 0
fi
[[ -e "$STATE_DIR/.s3csi-versitygw" || -z "$(ls -A "$STATE_DIR")" ]] ||
  vgw_die "$STATE_DIR was not made by start.sh (no .s3csi-versitygw marker); not touching it"
{ exec 9>>"$LOCK_FILE"; } 2>/dev/null || vgw_die "cannot write $LOCK_FILE"
flock -w 120 9 || vgw_die "another start/stop holds $LOCK_FILE for over 120 s"

is_ours() {
  local pid="$1" a found=0
  local -a args=()
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  for a in "${args[@]}"; do [[ "$a" == "$STATE_DIR/data" ]] && { found=1; break; }; done
  ((found)) || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */versitygw ]]
}

pid="$(cat "$PID_FILE" 2>/dev/null || true)"
if is_ours "$pid"; then
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while is_ours "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
  if is_ours "$pid"; then
    vgw_log "versitygw ($pid) still running after ${STOP_TIMEOUT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  vgw_log "stopped versitygw $pid"
else
  vgw_log "no server running (state dir $STATE_DIR)"
fi
rm -f "$PID_FILE" "$STATE_DIR/env"
if ((PURGE)); then
  rm -rf "$STATE_DIR"
  rm -f "$LOCK_FILE"
  vgw_log "removed $STATE_DIR"
fi
