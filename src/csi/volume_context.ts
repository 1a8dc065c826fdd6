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
  /**
   * `driver` (default), `secret` (credentials from the PV's `nodePublishSecretRef`) or `pod` (the
   * workload's ServiceAccount through STS).
   */
  authenticationSource: "authenticationSource",
  /**
   * With `authenticationSource: pod`: the role to assume (else the ServiceAccount's
   * `s3.csi.scality.com/role-arn` annotation).
   */
  roleArn: "roleArn",
  /** `mount-s3` (default) or `rclone`. */
  engine: "engine",
  /** Key prefix the volume is confined to (`prefix` mode of dynamic volumes). */
  prefix: "prefix",
  /** S3 region of the bucket. */
  region: "region",
  /**
   * Inline (ephemeral) volumes only: the mount options, comma-separated (a PV has
   * `spec.mountOptions`; a pod's `csi:` volume has no such field).
   */
  mountOptions: "mountOptions",
  /** The workload Pod's UID, added by kubelet (`podInfoOnMount: true`). */
  podUID: "csi.storage.k8s.io/pod.uid",
  /** The workload Pod's namespace, added by kubelet (`podInfoOnMount: true`). */
  podNamespace: "csi.storage.k8s.io/pod.namespace",
  /** The workload Pod's ServiceAccount, added by kubelet (`podInfoOnMount: true`). */
  serviceAccountName: "csi.storage.k8s.io/serviceAccount.name",
  /** `"true"` for an inline volume (a pod's own `csi:` volume), added by kubelet. */
  ephemeral: "csi.storage.k8s.io/ephemeral",
  /**
   * The workload's service account tokens, added by kubelet for the CSIDriver's `tokenRequests`:
   * JSON `{"<audience>": {"token": "…", "expirationTimestamp": "…"}}`. Secret: never logged.
   */
  serviceAccountTokens: "csi.storage.k8s.io/serviceAccount.tokens",
} as const;

/** Values of {@link VOLUME_CONTEXT.authenticationSource} ("" means `driver`). */
export const AUTHENTICATION_SOURCES = ["driver", "secret", "pod"] as const;

/**
 * A bucket name the node plugin mounts (S3's rules, loosely: upper case and `_` are allowed for
 * older S3-compatible servers; `..` is refused apart).
 */
export const VOLUME_BUCKET_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]$";
