#!/usr/bin/env bash
# csi-sanity --csi.checkpathcmd: prints file, directory, not_found or other for a path, after the
# same "<dir>/target" -> "<dir>/mount" rename the conformance proxy applies to node requests.
set -euo pipefail
root="${CONFORMANCE_KUBELET_ROOT:?CONFORMANCE_KUBELET_ROOT is not set}"
p="$1"
case "$p" in "$root"/pods/*/volumes/kubernetes.io~csi/*/target) p="${p%/target}/mount" ;; esac
if [ -L "$p" ]; then echo other
elif [ -d "$p" ]; then echo directory
elif [ -f "$p" ]; then echo file
elif [ -e "$p" ]; then echo other
else echo not_found
fi
