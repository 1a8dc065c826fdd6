/**
 * The kubelet's on-disk layout for pods and CSI volumes (Kubernetes v1.32), and the content of the
 * `vol_data.json` files it writes (`pkg/volume/csi/csi_mounter.go`, `csi_attacher.go` and
 * `csi_util.go` of `k8s.io/kubernetes`).
 *
 * @module
 */
import { createHash } from "node:crypto";

/** `kubernetes.io/csi`, escaped as a directory name. */
export const CSI_PLUGIN_DIR = "kubernetes.io~csi";
/** `kubernetes.io/empty-dir`, escaped as a directory name. */
export const EMPTY_DIR_PLUGIN_DIR = "kubernetes.io~empty-dir";
/** Name of the metadata file kubelet writes beside a CSI mount. */
export const VOL_DATA_FILE = "vol_data.json";

function trim(root: string): string {
  return root.length > 1 ? root.replace(/\/+$/, "") : root;
}

/** Lower-case hex SHA-256 of `text`. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** `<root>/pods/<uid>`. */
export function podDir(root: string, podUID: string): string {
  return `${trim(root)}/pods/${podUID}`;
}

/** `<root>/pods/<uid>/volumes`. */
export function podVolumesDir(root: string, podUID: string): string {
  return `${podDir(root, podUID)}/volumes`;
}

/** `k8s.io/utils/strings.EscapeQualifiedName`: `/` becomes `~`. */
export function escapeQualifiedName(name: string): string {
  return name.replaceAll("/", "~");
}

/** `<root>/pods/<uid>/volumes/kubernetes.io~csi/<specName>`: the parent of the target path. */
export function csiVolumeDir(root: string, podUID: string, specName: string): string {
  return `${podVolumesDir(root, podUID)}/${CSI_PLUGIN_DIR}/${escapeQualifiedName(specName)}`;
}

/** The CSI `target_path` kubelet sends: `…/kubernetes.io~csi/<pv>/mount`. */
export function csiTargetPath(root: string, podUID: string, specName: string): string {
  return `${csiVolumeDir(root, podUID, specName)}/mount`;
}

/** Host path of a pod's emptyDir volume. */
export function emptyDirPath(root: string, podUID: string, volumeName: string): string {
  return `${podVolumesDir(root, podUID)}/${EMPTY_DIR_PLUGIN_DIR}/${volumeName}`;
}

/** `<root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>`: the device dir of a volume. */
export function csiDeviceDir(root: string, driver: string, volumeHandle: string): string {
  return `${trim(root)}/plugins/kubernetes.io/csi/${driver}/${sha256Hex(volumeHandle)}`;
}

/** The unique volume name kubelet uses as operation key: `kubernetes.io/csi/<driver>^<handle>`. */
export function uniqueVolumeName(driver: string, volumeHandle: string): string {
  return `kubernetes.io/csi/${driver}^${volumeHandle}`;
}

/** VolumeAttachment-style id: `csi-` + hex sha256(handle + driver + node). */
export function attachmentId(volumeHandle: string, driver: string, nodeName: string): string {
  return `csi-${sha256Hex(`${volumeHandle}${driver}${nodeName}`)}`;
}

/** JSON of a `map[string]string` as Go's `json.Encoder` writes it: sorted keys, compact, `\n`. */
export function goJsonMap(map: Record<string, string>): string {
  const sorted = Object.fromEntries(Object.keys(map).sort().map((k) => [k, map[k]!]));
  return `${JSON.stringify(sorted)}\n`;
}

/** Content of a pod volume's `vol_data.json` (six keys; `seLinuxMountContext` is never used here). */
export function podVolData(args: {
  driverName: string;
  volumeHandle: string;
  nodeName: string;
  specVolID: string;
  /** @default "Persistent" */
  volumeLifecycleMode?: "Persistent" | "Ephemeral";
}): string {
  return goJsonMap({
    attachmentID: attachmentId(args.volumeHandle, args.driverName, args.nodeName),
    driverName: args.driverName,
    nodeName: args.nodeName,
    specVolID: args.specVolID,
    volumeHandle: args.volumeHandle,
    volumeLifecycleMode: args.volumeLifecycleMode ?? "Persistent",
  });
}

/** Content of the device dir's `vol_data.json`. */
export function deviceVolData(driverName: string, volumeHandle: string): string {
  return goJsonMap({ driverName, volumeHandle });
}
