#!/usr/bin/env bash
# Start versitygw (an S3 gateway on a local directory, the posix backend) on 127.0.0.1 for tests:
# a second real S3 server beside Ceph RGW, one that accepts Mountpoint's multipart uploads.
#
#   tests/testbed/services/versitygw/start.sh      # prints the env on stdout, progress on stderr
#   set -a; . "${VGW_STATE_DIR:-/var/tmp/s3csi-versitygw}/env"; set +a
#
# Idempotent: if the server of an earlier run is still up with the same settings and answers a
# signed request, the env is printed again. Otherwise what an earlier run left is stopped, the
# state dir is wiped and a new server starts (data does not survive a restart). A non-empty
# VGW_STATE_DIR without the .s3csi-versitygw marker is never wiped. Builds versitygw first
# (build.sh) when it is not in the cache.
#
# Settings (environment):
#   VGW_STATE_DIR      state dir (data, iam, tls, log, pid, env)   [/var/tmp/s3csi-versitygw]
#   VGW_PORT           S3 port on 127.0.0.1                        [17070]
#   VGW_TLS            1 = HTTPS with a certificate signed by a private CA made with openssl [0]
#   VGW_REGION         region                                      [us-east-1]
#   VGW_ACCESS_KEY_ID / VGW_SECRET_ACCESS_KEY              root user keys (RGW's test defaults)
#   VGW_OTHER_ACCESS_KEY_ID / VGW_OTHER_SECRET_ACCESS_KEY  second user (role "user")
#   VGW_START_TIMEOUT  seconds to wait for the server              [30]
#   VGW_CACHE, VGW_VERSION, VGW_GO                                 see build.sh
#
# Printed env (also written to $VGW_STATE_DIR/env), as tests/testbed/services/s3/rgw_start.sh:
#   S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION S3_SERVER=versitygw
#   S3_OTHER_ACCESS_KEY_ID S3_OTHER_SECRET_ACCESS_KEY
#   AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED AWS_RESPONSE_CHECKSUM_VALIDATION=WHEN_REQUIRED
#   and with VGW_TLS=1: S3_CA_BUNDLE=<state>/tls/ca.pem (the private CA that signed the server)
#
# Exit: 0 ok | 1 failed (reason on stderr) | 3 cannot run here (no Go to build, no openssl/curl)
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE_DIR="${VGW_STATE_DIR:-/var/tmp/s3csi-versitygw}"
PORT="${VGW_PORT:-17070}"
TLS="${VGW_TLS:-0}"
REGION="${VGW_REGION:-us-east-1}"
MAIN_AK="${VGW_ACCESS_KEY_ID:-S3CSITESTACCESSKEY01}"
MAIN_SK="${VGW_SECRET_ACCESS_KEY:-s3csiTestSecretKey0000000000000000000001}"
OTHER_AK="${VGW_OTHER_ACCESS_KEY_ID:-S3CSIOTHERACCESSKEY2}"
OTHER_SK="${VGW_OTHER_SECRET_ACCESS_KEY:-s3csiOtherSecretKey000000000000000000002}"
START_TIMEOUT="${VGW_START_TIMEOUT:-30}"

MARKER="$STATE_DIR/.s3csi-versitygw"
ENV_FILE="$STATE_DIR/env"
SETTINGS_FILE="$STATE_DIR/settings"
PID_FILE="$STATE_DIR/versitygw.pid"
LOG_FILE="$STATE_DIR/versitygw.log"
LOCK_FILE="${STATE_DIR%/}.lock"
SCHEME=http
[ "$TLS" = 1 ] && SCHEME=https
ENDPOINT="$SCHEME://127.0.0.1:$PORT"
EMPTY_SHA256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

validate() {
  if ! [[ "$PORT" =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT > 65535)); then
    vgw_die "VGW_PORT must be a port number, got '$PORT'"
  fi
  [[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] || vgw_die "VGW_START_TIMEOUT must be a number"
  case "$TLS" in 0 | 1) ;; *) vgw_die "VGW_TLS must be 0 or 1" ;; esac
  local v
  for v in MAIN_AK MAIN_SK OTHER_AK OTHER_SK; do
    [[ "${!v}" =~ ^[A-Za-z0-9/+]{8,}$ ]] || vgw_die "key $v must be 8+ chars of [A-Za-z0-9/+]"
  done
  [[ "$MAIN_AK" != "$OTHER_AK" ]] || vgw_die "the two users need different access keys"
  [[ "$STATE_DIR" == /* && "$STATE_DIR" != / ]] || vgw_die "VGW_STATE_DIR must be an absolute path other than /"
  command -v curl >/dev/null || vgw_skip "curl is needed (apt-get install curl)"
  if [ "$TLS" = 1 ]; then command -v openssl >/dev/null || vgw_skip "openssl is needed for VGW_TLS=1"; fi
}

# A pid counts only if it is a versitygw process whose argv names this state dir.
is_ours() {
  local pid="$1" a found=0
  local -a args=()
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  mapfile -d '' -t args 2>/dev/null <"/proc/$pid/cmdline" || return 1
  for a in "${args[@]}"; do [[ "$a" == "$STATE_DIR/data" ]] && { found=1; break; }; done
  ((found)) || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */versitygw ]]
}

stop_leftover() {
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  is_ours "$pid" || return 0
  vgw_log "stopping leftover server $pid"
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 50; i++)); do is_ours "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# Signed ListBuckets; prints the HTTP status (000 when nothing answers).
probe() {
  local -a tls=()
  [ "$TLS" = 1 ] && tls=(--cacert "$STATE_DIR/tls/ca.pem")
  curl -s -o /dev/null -w '%{http_code}' --max-time 3 "${tls[@]}" \
    --aws-sigv4 "aws:amz:$REGION:s3" --user "$1:$2" \
    -H "x-amz-content-sha256: $EMPTY_SHA256" "$ENDPOINT/" 2>/dev/null || true
}

fingerprint() {
  printf '%s\n' "version=$VGW_VERSION" "port=$PORT" "tls=$TLS" "region=$REGION" \
    "main=$MAIN_AK:$MAIN_SK" "other=$OTHER_AK:$OTHER_SK"
}

already_healthy() {
  [[ -f "$ENV_FILE" && -f "$SETTINGS_FILE" ]] || return 1
  [[ "$(cat "$SETTINGS_FILE")" == "$(fingerprint)" ]] || return 1
  is_ours "$(cat "$PID_FILE" 2>/dev/null || true)" || return 1
  [[ "$(probe "$MAIN_AK" "$MAIN_SK")" == 200 ]]
}

make_tls() {
  local d="$STATE_DIR/tls"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=s3csi test CA" \
    -keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1 || vgw_die "openssl: cannot make the CA"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1 || vgw_die "openssl: cannot make the server key"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$d/ext.cnf"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 30 -extfile "$d/ext.cnf" -out "$d/server.pem" >/dev/null 2>&1 || vgw_die "openssl: cannot sign the server certificate"
  chmod 600 "$d/ca.key" "$d/server.key"
}

env_text() {
  printf '%s\n' "S3_ENDPOINT=$ENDPOINT" "AWS_ACCESS_KEY_ID=$MAIN_AK" "AWS_SECRET_ACCESS_KEY=$MAIN_SK" \
    "AWS_REGION=$REGION" "S3_SERVER=versitygw" "S3_OTHER_ACCESS_KEY_ID=$OTHER_AK" \
    "S3_OTHER_SECRET_ACCESS_KEY=$OTHER_SK" "AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED" \
    "AWS_RESPONSE_CHECKSUM_VALIDATION=WHEN_REQUIRED"
  if [ "$TLS" = 1 ]; then printf '%s\n' "S3_CA_BUNDLE=$STATE_DIR/tls/ca.pem"; fi
}

start() {
  [ -d "$STATE_DIR" ] && stop_leftover
  rm -rf "$STATE_DIR"
  mkdir -p "$STATE_DIR/data" "$STATE_DIR/iam"
  : >"$MARKER"
  [ "$TLS" = 1 ] && make_tls
  if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
    vgw_die "port 127.0.0.1:$PORT (VGW_PORT) is already in use"
  fi
  local -a tls=()
  [ "$TLS" = 1 ] && tls=(--cert "$STATE_DIR/tls/server.pem" --key "$STATE_DIR/tls/server.key")
  # Keys through the environment, not argv (ps shows argv). No inherited stdio or lock fd 9.
  ROOT_ACCESS_KEY_ID="$MAIN_AK" ROOT_SECRET_ACCESS_KEY="$MAIN_SK" \
    setsid "$VGW_BIN" --port "127.0.0.1:$PORT" --region "$REGION" --iam-dir "$STATE_DIR/iam" \
    "${tls[@]}" posix "$STATE_DIR/data" </dev/null >>"$LOG_FILE" 2>&1 9>&- &
  local pid=$!
  echo "$pid" >"$PID_FILE"
  disown "$pid"
  local deadline=$((SECONDS + START_TIMEOUT))
  until [[ "$(probe "$MAIN_AK" "$MAIN_SK")" == 200 ]]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 5 "$LOG_FILE" >&2 || true
      vgw_die "versitygw exited while starting (log $LOG_FILE)"
    fi
    ((SECONDS < deadline)) || {
      stop_leftover
      vgw_die "versitygw did not answer within ${START_TIMEOUT}s (log $LOG_FILE)"
    }
    sleep 0.1
  done
  local -a insecure=()
  [ "$TLS" = 1 ] && insecure=(--allow-insecure)
  if ! "$VGW_BIN" admin --access "$MAIN_AK" --secret "$MAIN_SK" --region "$REGION" \
    --endpoint-url "$ENDPOINT" "${insecure[@]}" create-user --access "$OTHER_AK" --secret "$OTHER_SK" \
    --role user >>"$LOG_FILE" 2>&1; then
    stop_leftover
    vgw_die "cannot create the second user (log $LOG_FILE)"
  fi
  [[ "$(probe "$OTHER_AK" "$OTHER_SK")" == 200 ]] || {
    stop_leftover
    vgw_die "the second user cannot sign requests"
  }
  fingerprint >"$SETTINGS_FILE"
  env_text >"$ENV_FILE.tmp" && mv "$ENV_FILE.tmp" "$ENV_FILE"
}

main() {
  validate
  mkdir -p "$(dirname "$STATE_DIR")" 2>/dev/null || vgw_die "cannot create $(dirname "$STATE_DIR")"
  { exec 9>>"$LOCK_FILE"; } 2>/dev/null || vgw_die "cannot write $LOCK_FILE (set VGW_STATE_DIR)"
  flock -w 120 9 || vgw_die "another start/stop holds $LOCK_FILE for over 120 s"
  if [ -d "$STATE_DIR" ] && already_healthy; then
    vgw_log "already running ($ENDPOINT, state $STATE_DIR)"
    cat "$ENV_FILE"
    return 0
  fi
  if [[ -d "$STATE_DIR" && ! -e "$MARKER" && -n "$(ls -A "$STATE_DIR")" ]]; then
    vgw_die "$STATE_DIR is not empty and was not made by start.sh; refusing to wipe it (set VGW_STATE_DIR)"
  fi
  if [ ! -x "$VGW_BIN" ]; then
    local rc=0
    bash "$VGW_HERE/build.sh" >/dev/null || rc=$?
    [ "$rc" -eq 3 ] && exit 3
    [ "$rc" -eq 0 ] || vgw_die "build.sh failed (exit $rc)"
  fi
  local t0=$SECONDS
  start
  vgw_log "S3 ready at $ENDPOINT in $((SECONDS - t0)) s ($VGW_VERSION, state $STATE_DIR)"
  cat "$ENV_FILE"
}

main "$@"
