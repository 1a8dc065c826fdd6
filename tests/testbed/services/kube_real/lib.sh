# shellcheck shell=bash disable=SC2034 # variables are used by the sourcing scripts
# Shared settings for tests/testbed/services/kube_real/{build,start,stop}.sh. Sourced, not run.
# Test tier only: a real kube-apiserver + kube-controller-manager + etcd.

KR_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KR_REPO="$(cd "$KR_HERE/../../../.." && pwd)"
KR_GOMOD_DIR="$KR_REPO/tests/testbed/services/kube_real/go"

# Version of k8s.io/kubernetes pinned in the Go module (e.g. v1.32.13).
KR_KUBE_VERSION="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$KR_GOMOD_DIR/go.mod")"
KR_CACHE="${KUBE_REAL_CACHE:-/var/cache/s3csi-kube-real}"
KR_BIN="$KR_CACHE/$KR_KUBE_VERSION/bin"
KR_STATE="${KUBE_REAL_STATE:-/var/tmp/s3csi-kube-real}"

# Ports (loopback only). Defaults picked away from the usual 2379/6443/10257.
KR_ETCD_PORT="${KUBE_REAL_ETCD_PORT:-23790}"
KR_ETCD_PEER_PORT="${KUBE_REAL_ETCD_PEER_PORT:-23800}"
KR_APISERVER_PORT="${KUBE_REAL_APISERVER_PORT:-26443}"
KR_KCM_PORT="${KUBE_REAL_KCM_PORT:-26257}"

kr_log() { printf 'kube_real: %s\n' "$*" >&2; }
kr_die() { # kr_die CODE MESSAGE...
  local code="$1"
  shift
  printf 'kube_real: ERROR: %s\n' "$*" >&2
  exit "$code"
}
# Exit code 3 means "this machine cannot run the real control plane" (no Go,
# no module proxy, unsupported platform): callers should skip, not fail.
kr_skip() {
  printf 'kube_real: SKIP: %s\n' "$*" >&2
  exit 3
}

# shellcheck source=../go_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../go_lib.sh"
kr_find_go() { svc_find_go "${KUBE_REAL_GO:-}"; }

# Prints the pid stored in $1 if that process is alive, else nothing.
kr_live_pid() {
  local f="$1" pid
  [ -f "$f" ] || return 1
  pid="$(cat "$f" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# kr_stop_pidfile NAME PIDFILE TIMEOUT LOGFN: stop the process of PIDFILE if it is alive and is
# our NAME binary (a recycled pid is left alone): SIGTERM, TIMEOUT seconds, then SIGKILL. Removes
# the pid file. Returns 1 only when the process survived SIGKILL.
kr_stop_pidfile() {
  local name="$1" f="$2" timeout="$3" logfn="$4" pid i cmd
  pid="$(kr_live_pid "$f")" || {
    rm -f "$f"
    return 0
  }
  cmd="$( (tr '\0' ' ' <"/proc/$pid/cmdline") 2>/dev/null | cut -d' ' -f1)"
  if [ -z "$cmd" ]; then # exited, not yet reaped (a zombie has no command line)
    rm -f "$f"
    return 0
  fi
  if [ "${cmd##*/}" != "$name" ]; then
    "$logfn" "pid $pid in $f is '$cmd', not $name; not killing it"
    rm -f "$f"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < timeout * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    "$logfn" "$name (pid $pid) ignored SIGTERM for ${timeout}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if kill -0 "$pid" 2>/dev/null; then
    "$logfn" "$name (pid $pid) still alive"
    return 1
  fi
  rm -f "$f"
  "$logfn" "stopped $name (pid $pid)"
}
