/**
 * Credentials of CreateVolume/DeleteVolume: the provisioner Secret's data (`req.secrets`, resolved
 * by `csi-provisioner` from the StorageClass's `csi.storage.k8s.io/provisioner-secret-*`), or the
 * controller's own driver credentials when the StorageClass names no Secret.
 *
 * Never a silent fallback: malformed secrets are an error, not a reason to use the driver's keys;
 * and a volume created with a Secret must be deleted with one (the volume ID records which).
 *
 * @module
 */
import { failedPrecondition, invalidArgument } from "../csi/errors.ts";
import { SECRET_KEYS } from "../csi/secret_keys.ts";
import type { S3Credentials } from "../s3/bucket_store.ts";

const ACCESS_KEY_REGEXP = /^[A-Za-z0-9]{1,128}$/;
const SECRET_KEY_REGEXP = /^[A-Za-z0-9/+=-]{1,128}$/;
const TOKEN_REGEXP = /^[A-Za-z0-9/+=-]{1,4096}$/;

/** Credentials and where they came from. */
export interface ResolvedCredentials {
  /** Where they came from. */
  readonly source: "driver" | "secret";
  /** The keys. */
  readonly credentials: S3Credentials;
}

/** Driver credentials from an environment (`AWS_ACCESS_KEY_ID`, …); undefined when not configured. */
export function driverCredentialsFromEnv(
  env: (name: string) => string | undefined,
): S3Credentials | undefined {
  const accessKeyId = env("AWS_ACCESS_KEY_ID")?.trim();
  const secretAccessKey = env("AWS_SECRET_ACCESS_KEY")?.trim();
  if (!accessKeyId || !secretAccessKey) return undefined;
  const sessionToken = env("AWS_SESSION_TOKEN")?.trim() || undefined;
  return { accessKeyId, secretAccessKey, sessionToken };
}

/**
 * Credentials from a provisioner Secret's data.
 * @throws {CsiError} InvalidArgument naming the missing or malformed key (never its value)
 */
export function credentialsFromSecret(secrets: Readonly<Record<string, string>>): S3Credentials {
  const accessKeyId = secrets[SECRET_KEYS.accessKeyId]?.trim();
  const secretAccessKey = secrets[SECRET_KEYS.secretAccessKey]?.trim();
  const sessionToken = secrets[SECRET_KEYS.sessionToken]?.trim() || undefined;
  const keys = Object.keys(secrets).sort().join(", ") || "none";
  const fix =
    `The provisioner Secret named by csi.storage.k8s.io/provisioner-secret-name/-namespace must hold ${SECRET_KEYS.accessKeyId} and ${SECRET_KEYS.secretAccessKey} (optional ${SECRET_KEYS.sessionToken}); it has keys: ${keys}`;
  if (!accessKeyId || !ACCESS_KEY_REGEXP.test(accessKeyId)) {
    throw invalidArgument(
      `Provisioner secret: ${SECRET_KEYS.accessKeyId} is missing or malformed (expected 1-128 letters and digits). ${fix}`,
    );
  }
  if (!secretAccessKey || !SECRET_KEY_REGEXP.test(secretAccessKey)) {
    throw invalidArgument(
      `Provisioner secret: ${SECRET_KEYS.secretAccessKey} is missing or malformed (expected 1-128 characters of A-Z a-z 0-9 / + = -). ${fix}`,
    );
  }
  if (sessionToken !== undefined && !TOKEN_REGEXP.test(sessionToken)) {
    throw invalidArgument(`Provisioner secret: ${SECRET_KEYS.sessionToken} is malformed. ${fix}`);
  }
  return { accessKeyId, secretAccessKey, sessionToken };
}

const NO_DRIVER_CREDENTIALS =
  "the controller has no driver credentials (env AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY of the s3-csi-controller container)";

/**
 * CreateVolume: secrets when given, else the driver's credentials.
 * @throws {CsiError} InvalidArgument (bad secret) or FailedPrecondition (no credentials at all)
 */
export function createCredentials(
  secrets: Readonly<Record<string, string>> | null | undefined,
  driver: S3Credentials | undefined,
): ResolvedCredentials {
  if (secrets && Object.keys(secrets).length > 0) {
    return { source: "secret", credentials: credentialsFromSecret(secrets) };
  }
  if (!driver) {
    throw failedPrecondition(
      `No S3 credentials: the StorageClass names no provisioner secret and ${NO_DRIVER_CREDENTIALS}. Set csi.storage.k8s.io/provisioner-secret-name and -namespace in the StorageClass, or configure the driver credentials`,
    );
  }
  return { source: "driver", credentials: driver };
}

/**
 * DeleteVolume (and ValidateVolumeCapabilities): the same source CreateVolume used, as recorded in
 * the volume ID.
 * @throws {CsiError} FailedPrecondition when that source is not available
 */
export function deleteCredentials(
  recorded: "driver" | "secret",
  volumeId: string,
  secrets: Readonly<Record<string, string>> | null | undefined,
  driver: S3Credentials | undefined,
): ResolvedCredentials {
  if (recorded === "secret") {
    if (!secrets || Object.keys(secrets).length === 0) {
      throw failedPrecondition(
        `Volume "${volumeId}" was created with a provisioner secret, but no secret came with this call; the driver does not fall back to its own credentials. Make sure the PV's annotations volume.kubernetes.io/provisioner-deletion-secret-name/-namespace name an existing Secret (csi-provisioner reads it)`,
      );
    }
    return { source: "secret", credentials: credentialsFromSecret(secrets) };
  }
  if (!driver) {
    throw failedPrecondition(
      `Volume "${volumeId}" was created with the driver credentials, but ${NO_DRIVER_CREDENTIALS}`,
    );
  }
  return { source: "driver", credentials: driver };
}
