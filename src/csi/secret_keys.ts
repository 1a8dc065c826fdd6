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
} as const;
