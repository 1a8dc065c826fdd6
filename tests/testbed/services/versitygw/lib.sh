# shellcheck shell=bash disable=SC2034 # variables are used by the sourcing scripts
# Shared settings of tests/testbed/services/versitygw/{build,start,stop}.sh. Sourced, not run.
# Test tier only: versitygw (github.com/versity/versitygw, Apache-2.0), an S3 gateway serving a
# local directory (posix backend), built from the Go module proxy.

VGW_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VGW_MODULE="github.com/versity/versitygw"
VGW_VERSION="${VGW_VERSION:-v1.8.0}"
VGW_CACHE="${VGW_CACHE:-/var/cache/s3csi-versitygw}"
VGW_BIN="$VGW_CACHE/$VGW_VERSION/bin/versitygw"

vgw_log() { printf 'versitygw: %s\n' "$*" >&2; }
vgw_die() { printf 'versitygw: ERROR: %s\n' "$*" >&2; exit 1; }
# Exit 3 = this machine cannot run versitygw (no Go, no module proxy, ...): callers skip.
vgw_skip() { printf 'versitygw: SKIP: %s\n' "$*" >&2; exit 3; }

# shellcheck source=../go_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../go_lib.sh"
vgw_find_go() { svc_find_go "${VGW_GO:-}"; }
