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
  kr_stop_pidfile "$1" "$KR_STATE/$1.pid" "$STOP_TIMEOUT" kr_log || failed=1
}

stop_one kube-controller-manager
stop_one kube-apiserver
stop_one etcd

[ "$failed" -eq 0 ] || kr_die 1 "some processes could not be stopped"
if [ "$PURGE" -eq 1 ]; then
  rm -rf "$KR_STATE"
  kr_log "removed $KR_STATE"
fi
