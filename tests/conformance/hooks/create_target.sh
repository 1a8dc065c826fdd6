#!/usr/bin/env bash
# csi-sanity --csi.createmountpathcmd: what kubelet makes before NodePublishVolume for a new pod,
# <root>/pods/<pod-uid>/volumes/kubernetes.io~csi/<pv> (0750, like kubelet's MkdirAll), and NOT
# the ".../mount" leaf, which the driver must create. Prints that directory; csi-sanity then
# publishes at "<printed>/target", which the conformance proxy renames to ".../mount".
# Env: CONFORMANCE_KUBELET_ROOT (the node plugin's --kubelet-path).
set -euo pipefail
root="${CONFORMANCE_KUBELET_ROOT:?CONFORMANCE_KUBELET_ROOT is not set}"
uid="$(cat /proc/sys/kernel/random/uuid)"
dir="$root/pods/$uid/volumes/kubernetes.io~csi/pv-sanity-${uid:0:8}"
(umask 027 && mkdir -p "$dir")
echo "$dir"
