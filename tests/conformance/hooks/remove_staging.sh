#!/usr/bin/env bash
# csi-sanity --csi.removestagingpathcmd: kubelet's UnmountDevice clean-up of the globalmount dir
# and its parent; refuses anything mounted or not empty.
set -uo pipefail
root="${CONFORMANCE_KUBELET_ROOT:?CONFORMANCE_KUBELET_ROOT is not set}"
dir="$1"
case "$dir" in "$root"/plugins/kubernetes.io/csi/*/globalmount) ;; *)
  echo "remove_staging.sh: refusing $dir" >&2
  exit 2
  ;;
esac
rmdir "$dir" "${dir%/globalmount}" || { echo "remove_staging.sh: $dir not removable" >&2; exit 1; }
