#!/usr/bin/env bash
# Start a real, single-node-less Kubernetes control plane on loopback for tests:
# etcd + kube-apiserver + kube-controller-manager (no kubelet, no scheduler, no
# container engine: pods are accepted and stay Pending).
#
# Usage: KUBECONFIG="$(tests/testbed/services/kube_real/start.sh)"
#   stdout: exactly one line, the admin kubeconfig path (<state>/kubeconfig)
#   exit 0 ready | 1 failed (logs in <state>/logs) | 3 cannot work here (skip)
# Idempotent: if the control plane is already up and healthy it is reused
# (same data); otherwise leftovers are stopped and a fresh cluster (empty etcd)
# is started. Builds the binaries first if needed (tests/testbed/services/kube_real/build.sh).
#
# Env: KUBE_REAL_STATE (default /var/tmp/s3csi-kube-real), KUBE_REAL_CACHE,
#      KUBE_REAL_ETCD_PORT (23790), KUBE_REAL_ETCD_PEER_PORT (23800),
#      KUBE_REAL_APISERVER_PORT (26443), KUBE_REAL_KCM_PORT (26257),
#      KUBE_REAL_START_TIMEOUT seconds (default 120),
#      KUBE_REAL_CONTROLLERS (kube-controller-manager --controllers list),
#      KUBE_REAL_APISERVER_ARGS / KUBE_REAL_KCM_ARGS extra flags (word-split),
#      KUBE_REAL_SA_ISSUER service account token issuer (default
#      https://kubernetes.default.svc.cluster.local; an https URL, e.g. the apiserver's own
#      address so that others can fetch its OIDC discovery document).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

START_TIMEOUT="${KUBE_REAL_START_TIMEOUT:-120}"
SA_ISSUER="${KUBE_REAL_SA_ISSUER:-https://kubernetes.default.svc.cluster.local}"
# Controllers: ownerReference GC, namespace deletion, the default
# ServiceAccount (the ServiceAccount admission plugin rejects pods until it
# exists), legacy SA token secrets, PV/PVC binding, and the pv/pvc-protection
# finalizer removers (the default StorageObjectInUseProtection admission adds
# those finalizers; without these controllers PV/PVC deletes hang forever).
# Left out on purpose: node-dependent ones (nodelifecycle, podgc — it would
# delete pods bound to nodes that do not exist — attachdetach, daemonset...).
CONTROLLERS="${KUBE_REAL_CONTROLLERS:-garbagecollector,namespace,serviceaccount,serviceaccount-token,persistentvolume-binder,pv-protection,pvc-protection}"

for t in curl openssl flock setsid timeout; do
  command -v "$t" >/dev/null 2>&1 || kr_skip "'$t' is required (apt-get install curl openssl util-linux coreutils)"
done

# Binaries first (no-op when cached; build.sh has its own lock, and a cold
# build takes minutes, longer than anyone should wait on the state lock).
rc=0
"$KR_HERE/build.sh" >/dev/null || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"

mkdir -p "$KR_STATE" 2>/dev/null || kr_skip "cannot create state dir $KR_STATE (set KUBE_REAL_STATE)"
exec 8>"$KR_STATE/.lock"
flock -w "$((START_TIMEOUT + 60))" 8 || kr_die 1 "another start/stop holds $KR_STATE/.lock"

KUBECONFIG_PATH="$KR_STATE/kubeconfig"
APISERVER_URL="https://127.0.0.1:$KR_APISERVER_PORT"
ETCD_URL="http://127.0.0.1:$KR_ETCD_PORT"

admin_token() { awk -F, '$2 == "kube-real-admin" { print $1 }' "$KR_STATE/token.csv" 2>/dev/null; }
api_ok() { # api_ok PATH: 200 "ok" from the apiserver with the admin token
  local tok
  tok="$(admin_token)"
  [ -n "$tok" ] || return 1
  [ "$(curl -sk --max-time 5 -H "Authorization: Bearer $tok" "$APISERVER_URL$1" 2>/dev/null)" = ok ]
}
api_get() { # api_get PATH -> HTTP status code
  curl -sk --max-time 5 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(admin_token)" "$APISERVER_URL$1" 2>/dev/null || true
}
kcm_ok() { [ "$(curl -sk --max-time 5 "https://127.0.0.1:$KR_KCM_PORT/healthz" 2>/dev/null)" = ok ]; }
etcd_ok() { curl -s --max-time 5 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; }

# ---- already running? -----------------------------------------------------------
if kr_live_pid "$KR_STATE/etcd.pid" >/dev/null && kr_live_pid "$KR_STATE/kube-apiserver.pid" >/dev/null &&
  kr_live_pid "$KR_STATE/kube-controller-manager.pid" >/dev/null &&
  etcd_ok && api_ok /readyz && kcm_ok && [ -s "$KUBECONFIG_PATH" ]; then
  kr_log "already running ($APISERVER_URL); reusing it"
  echo "$KUBECONFIG_PATH"
  exit 0
fi
# Anything half-up (or left from a crashed run) is stopped first.
KUBE_REAL_STOP_NOLOCK=1 "$KR_HERE/stop.sh" >&2 || true

# Ports must be free (someone else's process on them would answer our probes).
for p in "$KR_ETCD_PORT" "$KR_ETCD_PEER_PORT" "$KR_APISERVER_PORT" "$KR_KCM_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    kr_die 1 "port 127.0.0.1:$p is already in use (set KUBE_REAL_*_PORT)"
  fi
done

# ---- fresh state -----------------------------------------------------------------
rm -rf "$KR_STATE/etcd-data" "$KR_STATE/pki" "$KR_STATE/logs" "$KR_STATE"/*.kubeconfig "$KUBECONFIG_PATH"
mkdir -p "$KR_STATE/pki/apiserver" "$KR_STATE/pki/kcm" "$KR_STATE/logs"
chmod 700 "$KR_STATE/pki"

# Service-account token signing key pair (apiserver signs/verifies, KCM's
# token controller signs legacy secret tokens).
openssl genrsa -out "$KR_STATE/pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$KR_STATE/pki/sa.key" -pubout -out "$KR_STATE/pki/sa.pub" 2>/dev/null

rand_token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ADMIN_TOKEN="$(rand_token)"
KCM_TOKEN="$(rand_token)"
umask 077
cat >"$KR_STATE/token.csv" <<TOKENS
$ADMIN_TOKEN,kube-real-admin,kube-real-admin,"system:masters"
$KCM_TOKEN,system:kube-controller-manager,system:kube-controller-manager,"system:masters"
TOKENS

write_kubeconfig() { # write_kubeconfig FILE USER TOKEN
  cat >"$1" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: kube-real
  cluster:
    server: $APISERVER_URL
    # Serving cert is self-signed by kube-apiserver (--cert-dir).
    insecure-skip-tls-verify: true
users:
- name: $2
  user:
    token: $3
contexts:
- name: kube-real
  context:
    cluster: kube-real
    user: $2
    namespace: default
current-context: kube-real
KCFG
}
write_kubeconfig "$KUBECONFIG_PATH" kube-real-admin "$ADMIN_TOKEN"
write_kubeconfig "$KR_STATE/kcm.kubeconfig" system:kube-controller-manager "$KCM_TOKEN"
umask 022

launch() { # launch NAME BIN ARGS... : detached, pid in <state>/NAME.pid
  local name="$1"
  shift
  # setsid: own session, so the caller's Ctrl-C / process-group kill does not
  # take down half the control plane; stop.sh stops it by pid.
  # 8>&-: the daemons must not inherit (and so hold forever) the state lock.
  setsid "$@" </dev/null >"$KR_STATE/logs/$name.log" 2>&1 8>&- &
  echo $! >"$KR_STATE/$name.pid"
}
wait_for() { # wait_for NAME DEADLINE CHECK...
  local name="$1" deadline="$2"
  shift 2
  while ! "$@"; do
    if ! kr_live_pid "$KR_STATE/$name.pid" >/dev/null; then
      tail -n 30 "$KR_STATE/logs/$name.log" >&2 || true
      KUBE_REAL_STOP_NOLOCK=1 "$KR_HERE/stop.sh" >&2 || true
      kr_die 1 "$name exited during startup (log: $KR_STATE/logs/$name.log)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 30 "$KR_STATE/logs/$name.log" >&2 || true
      KUBE_REAL_STOP_NOLOCK=1 "$KR_HERE/stop.sh" >&2 || true
      kr_die 1 "$name not ready within ${START_TIMEOUT}s (log: $KR_STATE/logs/$name.log)"
    fi
    sleep 0.3
  done
}

T0=$(date +%s)
DEADLINE=$((T0 + START_TIMEOUT))

# ---- etcd ------------------------------------------------------------------------
ETCD_VERSION="$("$KR_BIN/etcd" --version 2>/dev/null | awk '/^etcd Version:/ { print $3; exit }')"
ETCD_EXTRA=()
case "$ETCD_VERSION" in 3.[5-9]* | 3.[1-9][0-9]*) ETCD_EXTRA+=(--unsafe-no-fsync) ;; esac # throwaway data
launch etcd "$KR_BIN/etcd" \
  --name kube-real \
  --data-dir "$KR_STATE/etcd-data" \
  --listen-client-urls "$ETCD_URL" \
  --advertise-client-urls "$ETCD_URL" \
  --listen-peer-urls "http://127.0.0.1:$KR_ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$KR_ETCD_PEER_PORT" \
  --initial-cluster "kube-real=http://127.0.0.1:$KR_ETCD_PEER_PORT" \
  --initial-cluster-state new \
  --log-level warn \
  "${ETCD_EXTRA[@]}"
wait_for etcd "$DEADLINE" etcd_ok
kr_log "etcd $ETCD_VERSION ready on $ETCD_URL ($(($(date +%s) - T0))s)"

# ---- kube-apiserver ----------------------------------------------------------------
# Admission: the 1.32 defaults (NamespaceLifecycle, ServiceAccount, PodSecurity,
# StorageObjectInUseProtection, ...). None needs a node to admit a pod; the
# ServiceAccount plugin needs the namespace's "default" ServiceAccount, which
# the KCM serviceaccount controller creates a moment after the namespace.
# --endpoint-reconciler-type=none: Endpoints may not hold 127.0.0.1.
# shellcheck disable=SC2086
launch kube-apiserver "$KR_BIN/kube-apiserver" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --secure-port="$KR_APISERVER_PORT" \
  --cert-dir="$KR_STATE/pki/apiserver" \
  --etcd-servers="$ETCD_URL" \
  --authorization-mode=RBAC \
  --token-auth-file="$KR_STATE/token.csv" \
  --service-account-issuer="$SA_ISSUER" \
  --service-account-key-file="$KR_STATE/pki/sa.pub" \
  --service-account-signing-key-file="$KR_STATE/pki/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --endpoint-reconciler-type=none \
  --allow-privileged=true \
  --profiling=false \
  ${KUBE_REAL_APISERVER_ARGS:-}
wait_for kube-apiserver "$DEADLINE" api_ok /readyz
kr_log "kube-apiserver ready on $APISERVER_URL ($(($(date +%s) - T0))s)"

# ---- kube-controller-manager ---------------------------------------------------------
# No --authentication/--authorization-kubeconfig: its own HTTPS port only
# serves /healthz (always allowed), and delegated authn would poll for a
# kube-system/extension-apiserver-authentication ConfigMap that this apiserver
# (no --client-ca-file) never creates.
# shellcheck disable=SC2086
launch kube-controller-manager "$KR_BIN/kube-controller-manager" \
  --kubeconfig="$KR_STATE/kcm.kubeconfig" \
  --bind-address=127.0.0.1 \
  --secure-port="$KR_KCM_PORT" \
  --cert-dir="$KR_STATE/pki/kcm" \
  --leader-elect=false \
  --controllers="$CONTROLLERS" \
  --service-account-private-key-file="$KR_STATE/pki/sa.key" \
  --profiling=false \
  ${KUBE_REAL_KCM_ARGS:-}
wait_for kube-controller-manager "$DEADLINE" kcm_ok
# Usable for pods once the serviceaccount controller has run.
sa_ready() { [ "$(api_get /api/v1/namespaces/default/serviceaccounts/default)" = 200 ]; }
wait_for kube-controller-manager "$DEADLINE" sa_ready
kr_log "kube-controller-manager ready, controllers: $CONTROLLERS ($(($(date +%s) - T0))s)"

kr_log "control plane up in $(($(date +%s) - T0))s; KUBECONFIG=$KUBECONFIG_PATH"
echo "$KUBECONFIG_PATH"
