#!/usr/bin/env bash
# Crash and restart the kubelet of a running real node (start.sh), for tests of what a kubelet
# restart does to volumes: containers keep running while it is down, and the restarted kubelet
# reconciles them (orphaned pods killed, their volumes unpublished from what is on disk).
#
# Usage: kubelet.sh kill    SIGKILL the kubelet (as a crash would); containers are left running
#        kubelet.sh start   start it again with the same flags and wait until its healthz answers
#   exit 0 done | 1 failed | 3 no running real node
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ -s "$RN_STATE/env" ] || rn_skip "no running real node ($RN_STATE/env missing): run start.sh"
set -a
# shellcheck disable=SC1091
. "$RN_STATE/env"
set +a
PIDFILE="$RN_STATE/kubelet.pid"
TIMEOUT="${REAL_NODE_START_TIMEOUT:-180}"

case "${1:-}" in
kill)
  pid="$(kr_live_pid "$PIDFILE" || true)"
  [ -n "$pid" ] || rn_die 1 "the kubelet is not running"
  kill -KILL "$pid"
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && rn_die 1 "the kubelet (pid $pid) did not die"
  rn_log "kubelet (pid $pid) killed"
  ;;
start)
  [ -z "$(kr_live_pid "$PIDFILE" || true)" ] || rn_die 1 "the kubelet is already running"
  kr_live_pid "$RN_STATE/containerd.pid" >/dev/null || rn_die 1 "containerd is not running"
  rn_kubelet_cmd "$REAL_NODE_NAME" "$REAL_NODE_IP"
  printf '\n==== kubelet.sh start %s ====\n' "$(date -Is)" >>"$RN_STATE/logs/kubelet.log"
  (
    rn_close_fds
    exec setsid "${RN_KUBELET_CMD[@]}" </dev/null >>"$RN_STATE/logs/kubelet.log" 2>&1
  ) &
  echo $! >"$PIDFILE"
  deadline=$(($(date +%s) + TIMEOUT))
  healthz() { curl -s --max-time 2 "http://127.0.0.1:$RN_KUBELET_HEALTHZ_PORT/healthz" 2>/dev/null | grep -qx ok; }
  until healthz; do
    kr_live_pid "$PIDFILE" >/dev/null || rn_die 1 "the kubelet exited during startup (log $RN_STATE/logs/kubelet.log)"
    [ "$(date +%s)" -lt "$deadline" ] || rn_die 1 "the kubelet is not healthy within ${TIMEOUT}s"
    sleep 0.2
  done
  rn_log "kubelet restarted (pid $(cat "$PIDFILE"))"
  ;;
*) rn_die 2 "usage: kubelet.sh kill|start" ;;
esac
