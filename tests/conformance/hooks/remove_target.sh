#!/usr/bin/env bash
# csi-sanity --csi.removemountpathcmd, called with the directory create_target.sh printed: what
# kubelet's orphaned-pod clean-up does once the pod is gone. It removes an empty, unmounted
# ".../mount" left by the driver, then the pod's empty directories; it never removes anything
# that is mounted or not empty (kubelet refuses too), so the tier's final check sees leftovers.
set -uo pipefail
root="${CONFORMANCE_KUBELET_ROOT:?CONFORMANCE_KUBELET_ROOT is not set}"
dir="$1"
case "$dir" in "$root"/pods/*/volumes/kubernetes.io~csi/*) ;; *)
  echo "remove_target.sh: refusing $dir (not under $root/pods)" >&2
  exit 2
  ;;
esac
rc=0
if [ -e "$dir/mount" ]; then
  if mountpoint -q "$dir/mount"; then
    echo "remove_target.sh: $dir/mount is still mounted; left in place" >&2
    rc=1
  fi
  rmdir "$dir/mount" 2>/dev/null || true
fi
pod="${dir%/volumes/kubernetes.io~csi/*}"
for d in "$dir" "$pod/volumes/kubernetes.io~csi" "$pod/volumes" "$pod"; do
  rmdir "$d" 2>/dev/null || { echo "remove_target.sh: $d is not empty; left in place" >&2; exit 1; }
done
exit "$rc"
