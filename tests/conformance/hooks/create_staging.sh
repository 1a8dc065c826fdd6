#!/usr/bin/env bash
# csi-sanity --csi.createstagingpathcmd: kubelet's device path for a persistent CSI volume,
# <root>/plugins/kubernetes.io/csi/<driver>/<sha256>/globalmount (0750), which kubelet creates
# even for a driver without STAGE_UNSTAGE_VOLUME (it then never sends it). Prints it.
set -euo pipefail
root="${CONFORMANCE_KUBELET_ROOT:?CONFORMANCE_KUBELET_ROOT is not set}"
sha="$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)"
dir="$root/plugins/kubernetes.io/csi/s3.csi.scality.com/$sha/globalmount"
(umask 027 && mkdir -p "$dir")
echo "$dir"
