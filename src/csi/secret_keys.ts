/**
 * Keys of the S3 credential Secrets users create: the node-publish Secret of a volume
 * (`nodePublishSecretRef`, sent by kubelet as NodePublishVolume `secrets`) and the provisioner
 * Secret of a StorageClass (sent by csi-provisioner as CreateVolume/DeleteVolume `secrets`).
 *
 * Readers: `src/node/` and `src/provisioning/`.
 *
 * @module
 */

/** Keys accepted in a credentials Secret. */
export const SECRET_KEYS = {
  accessKeyId: "access_key_id",
  secretAccessKey: "secret_access_key",
  sessionToken: "session_token",
  /** Node-publish Secret only: the volume's S3 endpoint (else the driver's). */
  endpoint: "endpoint",
  /** Node-publish Secret only: the volume's S3 region (else its attribute, else the driver's). */
  region: "region",
} as const;

/**
 * Keys of a node-publish Secret that say where the bucket is, not who reads it: accepted with any
 * `authenticationSource` (with `driver`, a Secret may hold only these).
 */
export const CONNECTION_SECRET_KEYS: readonly string[] = [SECRET_KEYS.endpoint, SECRET_KEYS.region];
