#!/usr/bin/env bash
# Stop the control plane started by tests/testbed/services/kube_real/start.sh, by pid files.
#
# Usage: tests/testbed/services/kube_real/stop.sh [--purge]
#   --purge  also delete the state dir (etcd data, keys, kubeconfig, logs)
#   exit 0 stopped (or nothing was running) | 1 something survived SIGKILL
# Env: KUBE_REAL_STATE, KUBE_REAL_STOP_TIMEOUT seconds per process (default 20)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0
[ "${1:-}" = --purge ] && PURGE=1
STOP_TIMEOUT="${KUBE_REAL_STOP_TIMEOUT:-20}"

[ -d "$KR_STATE" ] || exit 0
if [ -z "${KUBE_REAL_STOP_NOLOCK:-}" ]; then # start.sh calls us holding the lock
  exec 8>"$KR_STATE/.lock"
  flock -w 180 8 || kr_die 1 "another start/stop holds $KR_STATE/.lock"
fi

failed=0
stop_one() { # stop_one NAME: SIGTERM, bounded wait, then SIGKILL
  local name="$1" f="$KR_STATE/$1.pid" pid i cmd
  pid="$(kr_live_pid "$f")" || {
    rm -f "$f"
    return 0
  }
  # Guard against a recycled pid: the process must be our binary.
  cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -d' ' -f1)"
  if [ "${cmd##*/}" != "$name" ]; then
    kr_log "pid $pid in $f is '$cmd', not $name; not killing it"
    rm -f "$f"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kr_log "$name (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if kill -0 "$pid" 2>/dev/null; then
    kr_log "$name (pid $pid) still alive"
    failed=1
    return 0
  fi
  rm -f "$f"
  kr_log "stopped $name (pid $pid)"
}

stop_one kube-controller-manager
stop_one kube-apiserver
stop_one etcd

[ "$failed" -eq 0 ] || kr_die 1 "some processes could not be stopped"
if [ "$PURGE" -eq 1 ]; then
  rm -rf "$KR_STATE"
  kr_log "removed $KR_STATE"
fi
