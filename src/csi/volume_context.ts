/**
 * The volume context this driver understands: the keys of a PV's `csi.volumeAttributes` (static
 * volumes, written by users), of the `volume_context` CreateVolume returns (dynamic volumes,
 * written by the CSI Controller service), and the pod keys kubelet adds with `podInfoOnMount`.
 *
 * Writers: users, `src/provisioning/`. Reader: `src/node/` (NodePublishVolume).
 *
 * @module
 */

/** Volume context keys. */
export const VOLUME_CONTEXT = {
  /** The bucket to mount (required). */
  bucketName: "bucketName",
  /** `driver` (default) or `secret` (credentials from the PV's `nodePublishSecretRef`). */
  authenticationSource: "authenticationSource",
  /** `mount-s3` (default) or `rclone`. */
  engine: "engine",
  /** Key prefix the volume is confined to (`prefix` mode of dynamic volumes). */
  prefix: "prefix",
  /** S3 region of the bucket. */
  region: "region",
  /** The workload Pod's UID, added by kubelet (`podInfoOnMount: true`). */
  podUID: "csi.storage.k8s.io/pod.uid",
} as const;

/** Values of {@link VOLUME_CONTEXT.authenticationSource} ("" means `driver`). */
export const AUTHENTICATION_SOURCES = ["driver", "secret"] as const;

/**
 * A bucket name the node plugin mounts (S3's rules, loosely: upper case and `_` are allowed for
 * older S3-compatible servers; `..` is refused apart).
 */
export const VOLUME_BUCKET_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]$";
