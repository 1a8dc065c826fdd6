#!/usr/bin/env bash
# Start a throwaway single-node Ceph cluster (1 mon, 1 OSD, 1 radosgw) that
# serves S3 on 127.0.0.1, for tests, CI and the local sandbox.
#
#   tests/testbed/services/s3/rgw_start.sh            # prints the env on stdout, progress on stderr
#   set -a; . "${S3_STATE_DIR:-/var/tmp/s3csi-rgw}/env"; set +a
#
# Idempotent: if the cluster from an earlier run is still up and answers a
# signed S3 request, the env is printed again and nothing else happens.
# Otherwise whatever an earlier run left is killed (ceph daemons whose argv
# names this state dir's ceph.conf), the state dir is wiped and a new cluster
# is built: data does not survive a stop. A non-empty S3_STATE_DIR that this
# script did not create (no .s3csi-rgw marker) is never wiped.
#
# Settings (environment):
#   S3_STATE_DIR        state dir (conf, data, pids, logs, env)  [/var/tmp/s3csi-rgw]
#   RGW_PORT            S3 port on 127.0.0.1                     [17480]
#   RGW_MON_PORT        mon port on 127.0.0.1 (msgr2)            [17300]
#   RGW_OSD_PORTS       OSD bind port range "MIN-MAX"            [17301-17399]
#   RGW_OSD_BACKEND     bluestore (sparse file) | memstore (RAM) [bluestore]
#   RGW_OSD_SIZE_GB     size of the OSD (sparse file or RAM cap)  [10]
#   RGW_MIN_FREE_MB     refuse to start with less free disk       [2048]
#   RGW_START_TIMEOUT   seconds for the whole start (not apt)     [90]
#   RGW_INSTALL         auto (install missing packages when root) | never  [auto]
#   RGW_REGION          value printed as AWS_REGION               [us-east-1]
#   RGW_ACCESS_KEY_ID / RGW_SECRET_ACCESS_KEY              main test user keys (fixed defaults)
#   RGW_OTHER_ACCESS_KEY_ID / RGW_OTHER_SECRET_ACCESS_KEY  second user keys (fixed defaults)
#   RGW_DEBUG           radosgw log level (1 = one line per request)  [1]
#   RGW_KEEP_ON_FAIL=1  leave the daemons running when the start fails (debugging)
#   RGW_STS=1           enable STS (AssumeRoleWithWebIdentity) and the IAM API: the main user gets
#                       the caps oidc-provider=* and roles=*                [0]
#   RGW_VERIFY_SSL      with RGW_STS=1: whether radosgw verifies the TLS certificates of the OIDC
#                       issuer it fetches keys from (true|false)            [true]
#   RGW_TRUST_CA        PEM file of CA certificates radosgw trusts besides the system's (its
#                       libcurl-gnutls reads only the system bundle: radosgw then runs in a mount
#                       namespace of its own where that bundle has them appended)  [unset]
#
# Printed env (also written to $S3_STATE_DIR/env):
#   S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION S3_SERVER=rgw
#   S3_OTHER_ACCESS_KEY_ID S3_OTHER_SECRET_ACCESS_KEY
#   AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED AWS_RESPONSE_CHECKSUM_VALIDATION=WHEN_REQUIRED
#
# See tests/testbed/services/s3/README.md, which also lists what Ceph 16/18 do differently from AWS
# S3 (the reason for the two WHEN_REQUIRED checksum settings above).
set -euo pipefail

STATE_DIR="${S3_STATE_DIR:-/var/tmp/s3csi-rgw}"
RGW_PORT="${RGW_PORT:-17480}"
MON_PORT="${RGW_MON_PORT:-17300}"
OSD_PORTS="${RGW_OSD_PORTS:-17301-17399}"
OSD_BACKEND="${RGW_OSD_BACKEND:-bluestore}"
OSD_SIZE_GB="${RGW_OSD_SIZE_GB:-10}"
MIN_FREE_MB="${RGW_MIN_FREE_MB:-2048}"
START_TIMEOUT="${RGW_START_TIMEOUT:-90}"
INSTALL_MODE="${RGW_INSTALL:-auto}"
REGION="${RGW_REGION:-us-east-1}"
MAIN_UID="s3csi-test"
MAIN_AK="${RGW_ACCESS_KEY_ID:-S3CSITESTACCESSKEY01}"
MAIN_SK="${RGW_SECRET_ACCESS_KEY:-s3csiTestSecretKey0000000000000000000001}"
OTHER_UID="s3csi-other"
OTHER_AK="${RGW_OTHER_ACCESS_KEY_ID:-S3CSIOTHERACCESSKEY2}"
OTHER_SK="${RGW_OTHER_SECRET_ACCESS_KEY:-s3csiOtherSecretKey000000000000000000002}"
KEEP_ON_FAIL="${RGW_KEEP_ON_FAIL:-0}"
RGW_DEBUG="${RGW_DEBUG:-1}"
RGW_STS="${RGW_STS:-0}"
RGW_VERIFY_SSL="${RGW_VERIFY_SSL:-true}"
RGW_TRUST_CA="${RGW_TRUST_CA:-}"
SYSTEM_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# Encrypts RGW's session tokens (16 bytes); only used when RGW_STS=1.
RGW_STS_KEY="s3csiStsKey00001"

# Debian packages to install (they pull in ceph-common, ceph-base, python3-rados)
# and the binaries we call.
PACKAGES=(ceph-mon ceph-osd radosgw curl)
BINARIES=(ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool curl /usr/bin/python3)
DAEMONS=(radosgw osd mon)           # pid files run/<name>.pid, stop order
EMPTY_SHA256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
# Pools RGW would otherwise create lazily (each costs ~2 s of osdmap churn on first use).
RGW_POOLS=(.rgw.root default.rgw.log default.rgw.control default.rgw.meta
           default.rgw.buckets.index default.rgw.buckets.data default.rgw.buckets.non-ec)

CONF="$STATE_DIR/ceph.conf"
RUN_DIR="$STATE_DIR/run"
LOG_DIR="$STATE_DIR/log"
ENV_FILE="$STATE_DIR/env"
MARKER="$STATE_DIR/.s3csi-rgw"
SETTINGS_FILE="$STATE_DIR/settings"
LOCK_FILE="${STATE_DIR%/}.lock"
T0=$(date +%s.%N)
DEADLINE=0
STARTED=0
# shellcheck source=rgw_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/rgw_lib.sh"

log() { printf '[rgw_start %5.1fs] %s\n' "$(elapsed)" "$*" >&2; }
die() { printf 'rgw_start: ERROR: %s\n' "$*" >&2; exit 1; }
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
remaining() { local r=$((DEADLINE - $(date +%s))); ((r > 0)) && echo "$r" || echo 1; }
past_deadline() { (($(date +%s) >= DEADLINE)); }

# ---------------------------------------------------------------- validation
validate_settings() {
  local v
  for v in RGW_PORT MON_PORT RGW_DEBUG OSD_SIZE_GB MIN_FREE_MB START_TIMEOUT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
  done
  [[ "$OSD_PORTS" =~ ^([0-9]+)-([0-9]+)$ ]] || die "RGW_OSD_PORTS must be MIN-MAX, got '$OSD_PORTS'"
  OSD_PORT_MIN="${BASH_REMATCH[1]}" OSD_PORT_MAX="${BASH_REMATCH[2]}"
  ((OSD_PORT_MAX - OSD_PORT_MIN >= 10)) || die "RGW_OSD_PORTS needs at least 10 ports"
  case "$OSD_BACKEND" in bluestore|memstore) ;; *) die "RGW_OSD_BACKEND must be bluestore or memstore";; esac
  case "$INSTALL_MODE" in auto|never) ;; *) die "RGW_INSTALL must be auto or never";; esac
  for v in MAIN_AK MAIN_SK OTHER_AK OTHER_SK; do
    [[ "${!v}" =~ ^[A-Za-z0-9/+]{8,}$ ]] || die "key $v must be 8+ chars of [A-Za-z0-9/+]"
  done
  [[ "$MAIN_AK" != "$OTHER_AK" ]] || die "the two users need different access keys"
  case "$RGW_STS" in 0|1) ;; *) die "RGW_STS must be 0 or 1, got '$RGW_STS'";; esac
  case "$RGW_VERIFY_SSL" in true|false) ;; *) die "RGW_VERIFY_SSL must be true or false";; esac
  if [[ -n "$RGW_TRUST_CA" ]]; then
    grep -q "BEGIN CERTIFICATE" "$RGW_TRUST_CA" 2>/dev/null || die "RGW_TRUST_CA=$RGW_TRUST_CA holds no PEM certificate"
    [[ -f "$SYSTEM_CA_BUNDLE" ]] || die "RGW_TRUST_CA needs the system bundle $SYSTEM_CA_BUNDLE"
    command -v unshare >/dev/null || die "RGW_TRUST_CA needs unshare (util-linux)"
  fi
  [[ "$STATE_DIR" == /* && "$STATE_DIR" != / ]] || die "S3_STATE_DIR must be an absolute path other than /"
}

# ---------------------------------------------------------------- packages
missing_binaries() {
  local b out=()
  for b in "${BINARIES[@]}"; do command -v "$b" >/dev/null 2>&1 || out+=("$b"); done
  if [[ -x /usr/bin/python3 ]] && ! /usr/bin/python3 -c 'import rados' 2>/dev/null; then out+=(python3-rados); fi
  echo "${out[*]:-}"
}

ensure_packages() {
  local missing; missing=$(missing_binaries)
  [[ -z "$missing" ]] && return 0
  [[ "$INSTALL_MODE" == never ]] && die "missing binaries ($missing) and RGW_INSTALL=never"
  ((EUID == 0)) || die "missing binaries ($missing); run as root to install ${PACKAGES[*]}, or use tests/testbed/services/s3/s3rver_start.ts"
  command -v apt-get >/dev/null || die "missing binaries ($missing) and no apt-get to install ${PACKAGES[*]}"
  local debver; debver=$(cat /etc/debian_version 2>/dev/null || echo unknown)
  local t aptlog
  t=$(date +%s)
  aptlog=$(mktemp /tmp/s3csi-rgw-apt.XXXXXX.log)
  log "installing ${PACKAGES[*]} (Debian $debver, missing: $missing); apt log: $aptlog"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get -o DPkg::Lock::Timeout=120 update >"$aptlog" 2>&1 ||
     ! apt-get -o DPkg::Lock::Timeout=120 install -y --no-install-recommends "${PACKAGES[@]}" >>"$aptlog" 2>&1; then
    tail -n 15 "$aptlog" >&2
    die "apt-get install ${PACKAGES[*]} failed (see $aptlog)"
  fi
  missing=$(missing_binaries)
  [[ -z "$missing" ]] || die "still missing after install: $missing"
  log "installed in $(($(date +%s) - t)) s: ceph $(ceph_version)"
  rm -f "$aptlog"
}

ceph_version() { ceph-mon --version 2>/dev/null | awk '{print $3}'; }

# ---------------------------------------------------------------- processes
pid_of() { cat "$RUN_DIR/$1.pid" 2>/dev/null || true; }

all_running() {
  local d
  for d in "${DAEMONS[@]}"; do is_ours "$(pid_of "$d")" || return 1; done
}

kill_leftovers() {
  local pid pids=()
  for pid in $(ours_by_scan); do pids+=("$pid"); done
  ((${#pids[@]})) || return 0
  log "killing leftover daemons: ${pids[*]}"
  kill -KILL "${pids[@]}" 2>/dev/null || true
  local i
  for ((i = 0; i < 50; i++)); do
    alive "${pids[@]}" || return 0
    sleep 0.1
  done
  die "leftover daemons ${pids[*]} did not die"
}

# start_daemon NAME CMD... : runs CMD detached: own session, no inherited
# stdio (so a `rgw_start.sh | cat` pipeline ends with the script) and not the
# lock fd 9 (a daemon holding the flock would block every later start/stop).
start_daemon() {
  local name="$1"; shift
  setsid "$@" </dev/null >>"$LOG_DIR/$name.out" 2>&1 9>&- &
  echo $! >"$RUN_DIR/$name.pid"
  disown $!
  STARTED=1
}

# ---------------------------------------------------------------- checks
port_busy() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

check_ports() {
  port_busy "$RGW_PORT" && die "port 127.0.0.1:$RGW_PORT (RGW_PORT) is already in use"
  port_busy "$MON_PORT" && die "port 127.0.0.1:$MON_PORT (RGW_MON_PORT) is already in use"
  return 0
}

check_disk() {
  local avail_kb size_kb pct
  read -r size_kb avail_kb < <(df -Pk "$STATE_DIR" | awk 'NR==2 {print $2, $4}')
  pct=$((avail_kb * 100 / size_kb))
  ((avail_kb / 1024 >= MIN_FREE_MB)) ||
    die "only $((avail_kb / 1024)) MiB free under $STATE_DIR, need RGW_MIN_FREE_MB=$MIN_FREE_MB"
  # The mon shuts itself down below 'mon data avail crit' (set to 1 % below).
  ((pct >= 2)) || die "only $pct % free on the filesystem of $STATE_DIR; the ceph mon needs >= 2 %"
}

# Signed ListBuckets; prints the HTTP status (000 when nothing answers).
# curl --aws-sigv4 omits x-amz-content-sha256, which RGW requires: send it.
s3_probe() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 3 \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$1:$2" \
    -H "x-amz-content-sha256: $EMPTY_SHA256" "http://127.0.0.1:$RGW_PORT/" 2>/dev/null || true
}

settings_fingerprint() {
  printf '%s\n' "port=$RGW_PORT" "mon=$MON_PORT" "osdports=$OSD_PORTS" "backend=$OSD_BACKEND" \
    "size=$OSD_SIZE_GB" "region=$REGION" "main=$MAIN_AK:$MAIN_SK" "other=$OTHER_AK:$OTHER_SK" \
    "sts=$RGW_STS:$RGW_VERIFY_SSL" "trust=${RGW_TRUST_CA:+$(sha256sum <"$RGW_TRUST_CA" | cut -c1-16)}"
}

already_healthy() {
  [[ -f "$ENV_FILE" && -f "$SETTINGS_FILE" ]] || return 1
  [[ "$(cat "$SETTINGS_FILE")" == "$(settings_fingerprint)" ]] || { log "settings changed: rebuilding"; return 1; }
  all_running || { log "earlier cluster is not (fully) running: rebuilding"; return 1; }
  [[ "$(s3_probe "$MAIN_AK" "$MAIN_SK")" == 200 ]] || { log "earlier cluster does not answer S3: rebuilding"; return 1; }
}

# ---------------------------------------------------------------- build
# mon_py ACTION ARGS...: mon commands through python3-rados (a dependency of
# the ceph CLI): 0.06 s a call instead of 0.25 s for each `ceph` CLI run.
#   ping | osd_new UUID | create_pools POOL... | osd_up (exit 0 when osd.0 is up)
mon_py() {
  timeout "$(remaining)" /usr/bin/python3 - "$CONF" "$@" <<'PY'
import json, sys
import rados

conf, action, args = sys.argv[1], sys.argv[2], sys.argv[3:]
c = rados.Rados(conffile=conf)
try:
    c.connect(timeout=3)
except Exception as e:
    sys.exit(f"cannot reach the mon: {e}")

def cmd(**kw):
    rc, out, err = c.mon_command(json.dumps(kw), b"", timeout=20)
    if rc != 0:
        sys.exit(f"ceph {kw['prefix']} {kw.get('pool', '')}: rc={rc} {err}")
    return out

if action == "ping":
    cmd(prefix="mon stat")
elif action == "osd_new":
    print(json.loads(cmd(prefix="osd new", uuid=args[0], format="json"))["osdid"])
elif action == "create_pools":
    for p in args:
        cmd(prefix="osd pool create", pool=p, pg_num=8, pgp_num=8, pool_type="replicated")
elif action == "osd_up":
    st = json.loads(cmd(prefix="osd stat", format="json"))
    sys.exit(0 if st.get("num_up_osds") == 1 else 1)
else:
    sys.exit(f"unknown action {action}")
c.shutdown()
PY
}

# The OSD's object classes (cls_rgw, cls_version, …), which RGW needs. Debian 13's Ceph 18 build
# looks for them at a relative path (lib/<triplet>/rados-classes) and RGW then fails with
# "Operation not supported": name the directory the package installs them in.
rados_class_dir() {
  local d
  for d in /usr/lib/*/rados-classes /usr/lib64/rados-classes /usr/lib/rados-classes; do
    [ -e "$d/libcls_rgw.so" ] && { echo "$d"; return 0; }
  done
  return 1
}

# STS: the web-identity engine in the S3 auth chain, the key that seals session tokens, and
# whether radosgw checks the TLS certificate of the OIDC issuer it fetches keys from.
sts_conf() {
  ((RGW_STS)) || return 0
  printf '%s\n' "rgw s3 auth use sts = true" "rgw sts key = $RGW_STS_KEY" \
    "rgw verify ssl = $RGW_VERIFY_SSL"
}

write_conf() {
  local fsid="$1" class_dir=""
  class_dir="$(rados_class_dir)" || true
  cat >"$CONF" <<EOF
# Generated by tests/testbed/services/s3/rgw_start.sh: a throwaway single-node cluster on loopback.
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$MON_PORT]
public addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
ms bind port min = $OSD_PORT_MIN
ms bind port max = $OSD_PORT_MAX
# No cephx. radosgw's default ms_mon_client_mode=secure cannot work without
# auth (it loops on "get_initial_auth_request returned -13"): force crc.
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
ms mon service mode = crc
ms mon cluster mode = crc
ms client mode = crc
ms service mode = crc
ms cluster mode = crc
run dir = $RUN_DIR
log file = $LOG_DIR/\$name.log
mon cluster log file = $LOG_DIR/cluster.log
crash dir = $STATE_DIR/crash
log to stderr = false
err to stderr = true
# One OSD, no replicas, no mgr.
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
# The mon stops itself when its disk has < 5 % free by default.
mon data avail crit = 1
mon data avail warn = 2
# Faster osdmap commits (pool creation, OSD boot); fine for one throwaway mon.
paxos propose interval = 0.05

mon warn on insecure global id reclaim allowed = false

[mon]
mon data = $STATE_DIR/mon.\$id
admin socket = $RUN_DIR/\$name.asok

[osd]
osd data = $STATE_DIR/osd.\$id
admin socket = $RUN_DIR/\$name.asok
${class_dir:+osd class dir = $class_dir}
osd objectstore = $OSD_BACKEND
osd memory target = 1073741824
# bluestore: a sparse file osd.0/block (do not set 'bluestore block path').
bluestore block create = true
bluestore block size = $((OSD_SIZE_GB * 1024 * 1024 * 1024))
bluestore fsck on mount = false
bluestore fsck on mkfs = false
# Each close of the block file waits for the aio thread's poll (250 ms by
# default) and the OSD opens/closes it ~12 times while starting: ~3 s saved.
bdev aio poll ms = 20
memstore device bytes = $((OSD_SIZE_GB * 1024 * 1024 * 1024))
osd max object size = 134217728

[client]
# Read by radosgw and radosgw-admin (which runs as client.admin).
rgw data = $STATE_DIR/rgw
rgw dns name = 127.0.0.1
# Deleted data is kept until GC runs (default 2 h); keep the OSD from filling up.
rgw gc obj min wait = 30
rgw gc processor period = 30
rgw enable usage log = false

[client.rgw.s3csi]
admin socket = $RUN_DIR/\$name.asok
# tcp_nodelay: without it every small response waits ~45 ms (Nagle + delayed ACK).
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
debug rgw = $RGW_DEBUG
$(sts_conf)
EOF
}

wait_mon() {
  local out
  until out=$(mon_py ping 2>&1); do
    alive "$(pid_of mon)" || { tail -n 20 "$LOG_DIR"/mon.*.log "$LOG_DIR/mon.out" >&2 2>/dev/null || true; die "ceph-mon exited (logs in $LOG_DIR)"; }
    past_deadline && die "ceph-mon did not answer within ${START_TIMEOUT}s: $out"
    sleep 0.1
  done
}

# Runs in the background while the pools are created: mkfs + start of osd.0.
build_osd() {
  local uuid="$1"
  mkdir -p "$STATE_DIR/osd.0"
  if ! timeout "$(remaining)" ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$uuid" >"$LOG_DIR/osd-mkfs.out" 2>&1; then
    echo "ceph-osd --mkfs failed (bluestore needs O_DIRECT/libaio on $STATE_DIR; try RGW_OSD_BACKEND=memstore)" >"$RUN_DIR/osd.failed"
    return 1
  fi
  start_daemon osd ceph-osd -f -c "$CONF" -i 0
}

wait_osd_up() {
  while :; do
    if [[ -f "$RUN_DIR/osd.failed" ]]; then tail -n 20 "$LOG_DIR/osd-mkfs.out" >&2; die "$(cat "$RUN_DIR/osd.failed")"; fi
    if [[ -s "$RUN_DIR/osd.pid" ]] && ! alive "$(pid_of osd)"; then
      tail -n 20 "$LOG_DIR/osd.0.log" "$LOG_DIR/osd.out" >&2 2>/dev/null || true
      die "ceph-osd exited (logs in $LOG_DIR)"
    fi
    mon_py osd_up 2>/dev/null && return 0
    past_deadline && die "osd.0 did not come up within ${START_TIMEOUT}s (logs in $LOG_DIR)"
    sleep 0.1
  done
}

create_pools() {
  mon_py create_pools "${RGW_POOLS[@]}" >>"$LOG_DIR/pools.out" 2>&1 ||
    { tail -n 20 "$LOG_DIR/pools.out" >&2; die "creating the RGW pools failed"; }
}

create_user() {
  local uid="$1" ak="$2" sk="$3"
  if ! timeout "$(remaining)" radosgw-admin -c "$CONF" user create \
      --uid "$uid" --display-name "$uid" --access-key "$ak" --secret-key "$sk" \
      >>"$LOG_DIR/users.out" 2>&1; then
    tail -n 20 "$LOG_DIR/users.out" >&2
    die "radosgw-admin user create $uid failed or timed out"
  fi
}

wait_s3() {
  local code
  while :; do
    code=$(s3_probe "$MAIN_AK" "$MAIN_SK")
    [[ "$code" == 200 ]] && return 0
    alive "$(pid_of radosgw)" || { tail -n 20 "$LOG_DIR/client.rgw.s3csi.log" "$LOG_DIR/radosgw.out" >&2 2>/dev/null || true; die "radosgw exited (logs in $LOG_DIR)"; }
    past_deadline && die "S3 endpoint did not answer 200 within ${START_TIMEOUT}s (last HTTP $code; logs in $LOG_DIR)"
    sleep 0.2
  done
}

env_text() {
  cat <<EOF
S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
AWS_ACCESS_KEY_ID=$MAIN_AK
AWS_SECRET_ACCESS_KEY=$MAIN_SK
AWS_REGION=$REGION
S3_SERVER=rgw
S3_OTHER_ACCESS_KEY_ID=$OTHER_AK
S3_OTHER_SECRET_ACCESS_KEY=$OTHER_SK
AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED
AWS_RESPONSE_CHECKSUM_VALIDATION=WHEN_REQUIRED
EOF
}

on_exit() {
  local rc=$?
  if ((rc != 0 && STARTED == 1)); then
    if [[ "$KEEP_ON_FAIL" == 1 ]]; then
      log "start failed; daemons left running (RGW_KEEP_ON_FAIL=1), logs in $LOG_DIR"
    else
      log "start failed; stopping what was started (logs kept in $LOG_DIR)"
      kill_leftovers || true
    fi
  fi
}

build_cluster() {
  DEADLINE=$(($(date +%s) + START_TIMEOUT))
  local fsid osd_uuid
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)

  # Wipe the earlier run (the lock file lives beside the dir, not in it).
  rm -rf "$STATE_DIR"
  mkdir -p "$RUN_DIR" "$LOG_DIR" "$STATE_DIR/mon.a" "$STATE_DIR/rgw" "$STATE_DIR/crash"
  : >"$MARKER"
  check_disk
  check_ports
  write_conf "$fsid"

  log "creating mon (127.0.0.1:$MON_PORT)"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$MON_PORT]" "$STATE_DIR/monmap" >"$LOG_DIR/mkfs.out" 2>&1 ||
    { cat "$LOG_DIR/mkfs.out" >&2; die "monmaptool failed"; }
  timeout 60 ceph-mon -c "$CONF" -i a --mkfs --monmap "$STATE_DIR/monmap" >>"$LOG_DIR/mkfs.out" 2>&1 ||
    { tail -n 20 "$LOG_DIR/mkfs.out" >&2; die "ceph-mon --mkfs failed"; }
  start_daemon mon ceph-mon -f -c "$CONF" -i a
  wait_mon

  log "creating osd.0 ($OSD_BACKEND, ${OSD_SIZE_GB} GiB) and ${#RGW_POOLS[@]} pools"
  local id; id=$(mon_py osd_new "$osd_uuid" 2>>"$LOG_DIR/mkfs.out") || die "ceph osd new failed (see $LOG_DIR/mkfs.out)"
  [[ "$id" == 0 ]] || die "ceph osd new returned id '$id', expected 0"
  build_osd "$osd_uuid" &
  local osd_builder=$!
  create_pools
  wait "$osd_builder" || true   # failure is reported by wait_osd_up via osd.failed

  # radosgw must not start before the OSD is up: its first read would wait
  # for the next objecter tick (5 s). The first user create also sets up the
  # default zone, so radosgw does not race radosgw-admin doing the same.
  wait_osd_up
  log "creating users, starting radosgw (127.0.0.1:$RGW_PORT)"
  create_user "$MAIN_UID" "$MAIN_AK" "$MAIN_SK"
  if ((RGW_STS)); then
    timeout "$(remaining)" radosgw-admin -c "$CONF" caps add --uid "$MAIN_UID" \
      --caps "oidc-provider=*;roles=*" >>"$LOG_DIR/users.out" 2>&1 ||
      { tail -n 20 "$LOG_DIR/users.out" >&2; die "radosgw-admin caps add $MAIN_UID failed"; }
  fi
  if [[ -n "$RGW_TRUST_CA" ]]; then
    # The system bundle plus ours, seen only by radosgw (a private mount namespace; unshare and
    # sh exec, so the pid is radosgw's).
    cat "$SYSTEM_CA_BUNDLE" "$RGW_TRUST_CA" >"$STATE_DIR/ca-bundle.crt"
    start_daemon radosgw unshare -m --propagation private sh -c \
      'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$STATE_DIR/ca-bundle.crt" \
      "$SYSTEM_CA_BUNDLE" radosgw -f -c "$CONF" -n client.rgw.s3csi
  else
    start_daemon radosgw radosgw -f -c "$CONF" -n client.rgw.s3csi
  fi
  create_user "$OTHER_UID" "$OTHER_AK" "$OTHER_SK"
  wait_s3
  [[ "$(s3_probe "$OTHER_AK" "$OTHER_SK")" == 200 ]] || die "second user cannot sign requests"

  settings_fingerprint >"$SETTINGS_FILE"
  env_text >"$ENV_FILE.tmp" && mv "$ENV_FILE.tmp" "$ENV_FILE"
}

main() {
  validate_settings
  mkdir -p "$(dirname "$STATE_DIR")" 2>/dev/null || die "cannot create $(dirname "$STATE_DIR") (set S3_STATE_DIR to a writable path)"
  { exec 9>>"$LOCK_FILE"; } 2>/dev/null || die "cannot write $LOCK_FILE (set S3_STATE_DIR to a writable path)"
  flock -w 120 9 || die "another rgw_start/rgw_stop holds $LOCK_FILE for over 120 s"

  if [[ -d "$STATE_DIR" ]] && command -v curl >/dev/null && already_healthy; then
    log "already running and healthy ($STATE_DIR)"
    cat "$ENV_FILE"
    return 0
  fi
  if [[ -d "$STATE_DIR" && ! -e "$MARKER" && -n "$(ls -A "$STATE_DIR")" ]]; then
    die "$STATE_DIR is not empty and was not made by rgw_start.sh; refusing to wipe it (set S3_STATE_DIR)"
  fi
  ensure_packages
  [[ -d "$STATE_DIR" ]] && kill_leftovers
  trap on_exit EXIT
  build_cluster
  trap - EXIT
  log "S3 ready at http://127.0.0.1:$RGW_PORT (ceph $(ceph_version), state $STATE_DIR)"
  cat "$ENV_FILE"
}

main "$@"
