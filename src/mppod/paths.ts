/**
 * File-system layout shared by the node plugin and the Mountpoint Pod (mounter).
 *
 * The Mountpoint Pod has a `comm` emptyDir mounted at {@link COMM_DIR}. The node plugin reaches the
 * same directory on the host through the kubelet's emptyDir path ({@link hostCommDir}).
 *
 * @module
 */
import { DRIVER_NAME } from "../util/version.ts";

/** Default kubelet root directory. */
export const DEFAULT_KUBELET_ROOT = "/var/lib/kubelet";

/** Name of the emptyDir volume shared between node plugin and mounter. */
export const COMM_VOLUME_NAME = "comm";
/** Mount path of the comm volume inside the Mountpoint Pod. */
export const COMM_DIR = "/comm";

/**
 * Name of the mounter's private emptyDir: the engine's HOME and working files, off the small
 * memory-backed comm dir (which also holds the credentials and is shared with the node plugin).
 */
export const WORK_VOLUME_NAME = "work";
/** Mount path of the work volume inside the Mountpoint Pod. */
export const WORK_DIR = "/work";

/**
 * Unix socket the mounter listens on. Writer: mounter (creates it). Reader: node plugin (connects,
 * sends one {@link MountMessage} with the FUSE fd).
 */
export const MOUNT_SOCK = "mount.sock";

/**
 * Unix socket the supervisor (the mounter once it has the FUSE fd) listens on while it serves: a
 * root peer gets the FUSE fd back (`SCM_RIGHTS`) with `{"session":"<id>"}`. Writer: supervisor.
 * Reader: node plugin, which takes custody of the connection again after a restart of its own.
 */
export const CUSTODY_SOCK = "custody.sock";

/**
 * File the mounter writes when the engine failed (its last output, bounded). Writer: mounter.
 * Reader: node plugin (reports it in the NodePublishVolume error) and operators.
 */
export const MOUNT_ERROR = "mount.error";

/**
 * File whose presence tells the mounter that the exit is wanted: it then exits 0 so the pod
 * ends `Succeeded`. Writer: node plugin (unmounter). Reader: mounter.
 */
export const MOUNT_EXIT = "mount.exit";

/**
 * Directory for credential files (mode 0600, owned by the Mountpoint Pod's user).
 * Writer: node plugin. Reader: the engine via env vars naming the files. Removed on unmount.
 */
export const CREDENTIALS_DIR = "credentials";

/** Comm dir of a Mountpoint Pod as seen on the host, through the kubelet's emptyDir path. */
export function hostCommDir(kubeletRoot: string, mpPodUID: string): string {
  return `${
    trimSlash(kubeletRoot)
  }/pods/${mpPodUID}/volumes/kubernetes.io~empty-dir/${COMM_VOLUME_NAME}`;
}

/** Directory under which the node plugin mounts one FUSE source per Mountpoint Pod. */
export function sourceMountRoot(kubeletRoot: string): string {
  return `${trimSlash(kubeletRoot)}/plugins/${DRIVER_NAME}/mnt`;
}

/** FUSE source mount of one Mountpoint Pod; targets are bind mounts of it. */
export function sourceMountDir(kubeletRoot: string, mpPodName: string): string {
  return `${sourceMountRoot(kubeletRoot)}/${mpPodName}`;
}

/**
 * The node plugin's record of the sessions whose FUSE fd it holds (one `<mp pod>.json` each: the
 * pod's UID, the source and the message to send again), so that a restarted node plugin can take
 * their custody back. Root's, 0700.
 */
export function sessionsDir(kubeletRoot: string): string {
  return `${trimSlash(kubeletRoot)}/plugins/${DRIVER_NAME}/sessions`;
}

/** Directory of the node plugin's own CSI socket, the kubelet's plugin dir for this driver. */
export function pluginDir(kubeletRoot: string): string {
  return `${trimSlash(kubeletRoot)}/plugins/${DRIVER_NAME}`;
}

/**
 * Parse a kubelet CSI target path `<root>/pods/<podUID>/volumes/kubernetes.io~csi/<pvName>/mount`.
 * Returns undefined when the path does not have that shape or is outside `kubeletRoot`.
 */
export function parseTargetPath(
  kubeletRoot: string,
  targetPath: string,
): { podUID: string; volumeName: string } | undefined {
  const root = trimSlash(kubeletRoot);
  if (!targetPath.startsWith(`${root}/pods/`)) return undefined;
  const rest = targetPath.slice(root.length + "/pods/".length).split("/");
  if (
    rest.length !== 5 || rest[1] !== "volumes" || rest[2] !== "kubernetes.io~csi" ||
    rest[4] !== "mount"
  ) {
    return undefined;
  }
  const [podUID, , , volumeName] = rest as [string, string, string, string];
  if (
    !podUID || !volumeName || podUID === ".." || volumeName === ".." || podUID === "." ||
    volumeName === "."
  ) {
    return undefined;
  }
  return { podUID, volumeName };
}

function trimSlash(p: string): string {
  return p.length > 1 ? p.replace(/\/+$/, "") : p;
}
