/**
 * S3 credentials of a volume: driver-level (the node plugin's own `AWS_ACCESS_KEY_ID` /
 * `AWS_SECRET_ACCESS_KEY` [/ `AWS_SESSION_TOKEN`]) or per-volume (the PV's `nodePublishSecretRef`,
 * which kubelet resolves and sends as `secrets`).
 *
 * There is **no fallback** between the two (upstream silently uses driver credentials when a
 * `secret` volume arrives without secrets): `secret` without secrets, and credential keys on a
 * `driver` volume, are both refused with a message that says what to fix. The Secret's connection
 * keys (`endpoint`, `region`: where the bucket is, see `publish_request.ts`) are not credentials
 * and are accepted with either source.
 *
 * Credentials reach the engine as an AWS shared-credentials profile written into the Mountpoint
 * Pod's comm dir (files 0600, owned by the pod's user); only the file paths travel in the mount
 * message's environment. The comm dir belongs to an untrusted pod, so the files are written and
 * removed only through a {@link DirHandle} ({@link writeCredentials}, {@link removeCredentials}):
 * a planted link cannot redirect them to the host or to another pod's volume.
 *
 * @module
 */
import { failedPrecondition, invalidArgument } from "../csi/errors.ts";
import { CONNECTION_SECRET_KEYS, SECRET_KEYS } from "../csi/secret_keys.ts";
import type { AuthenticationSource } from "../api/mountpoint_s3_pod_attachment.ts";
import { COMM_DIR, CREDENTIALS_DIR } from "../mppod/paths.ts";
import { type DirHandle, UnsafeEntryError } from "../sys/files.ts";

/** Profile name written in the credential files. */
export const PROFILE_NAME = "s3-csi";
/** Credentials file name inside the credentials dir. */
export const CREDENTIALS_FILE = "s3-csi-credentials";
/** Config file name inside the credentials dir. */
export const CONFIG_FILE = "s3-csi-config";

const ACCESS_KEY_REGEXP = /^[A-Za-z0-9]{1,128}$/;
const SECRET_KEY_REGEXP = /^[A-Za-z0-9/+=-]{1,128}$/;
const TOKEN_REGEXP = /^[A-Za-z0-9/+=-]{1,4096}$/;

/** Resolved credentials. */
export interface S3Credentials {
  /** Where they came from. */
  readonly source: AuthenticationSource;
  /** Access key id (not secret; may be logged for audit). */
  readonly accessKeyId: string;
  /** Secret access key. */
  readonly secretAccessKey: string;
  /** Session token of temporary credentials. */
  readonly sessionToken?: string;
  /**
   * No credentials at all (`no-sign-request`, public buckets): the keys are empty, nothing is
   * written into the Mountpoint Pod and the engine signs nothing.
   */
  readonly anonymous?: true;
  /** When temporary credentials expire (epoch ms), when known. */
  readonly expiresAt?: number;
}

function checkKeys(
  where: string,
  accessKeyId: string | undefined,
  secretAccessKey: string | undefined,
  sessionToken: string | undefined,
): string | undefined {
  if (!accessKeyId || !ACCESS_KEY_REGEXP.test(accessKeyId)) {
    return `${where}: access key id is missing or malformed (expected 1-128 letters and digits)`;
  }
  if (!secretAccessKey || !SECRET_KEY_REGEXP.test(secretAccessKey)) {
    return `${where}: secret access key is missing or malformed (expected 1-128 characters of A-Z a-z 0-9 / + = -)`;
  }
  if (sessionToken !== undefined && !TOKEN_REGEXP.test(sessionToken)) {
    return `${where}: session token is malformed`;
  }
  return undefined;
}

/**
 * Resolve the credentials of a publish.
 * @param secrets the request's `secrets` (node-publish Secret data)
 * @param driverEnv the node plugin's environment
 * @param unsigned the volume has `no-sign-request`: no credentials (only with `driver`; a
 *   `secret` volume with it is refused before, in the request's validation)
 * @throws {CsiError} InvalidArgument (volume misconfigured) or FailedPrecondition (driver lacks
 *   credentials)
 */
export function resolveCredentials(
  source: Exclude<AuthenticationSource, "pod">,
  secrets: Readonly<Record<string, string>> | null | undefined,
  driverEnv: (name: string) => string | undefined,
  unsigned = false,
): S3Credentials {
  const given = Object.keys(secrets ?? {});
  const credentialKeys = given.filter((k) => !CONNECTION_SECRET_KEYS.includes(k));
  if (source === "driver") {
    if (credentialKeys.length > 0) {
      throw invalidArgument(
        `The volume's node-publish Secret has keys ${
          credentialKeys.sort().join(", ")
        } but authenticationSource is "driver": set volumeAttributes.authenticationSource: secret to use the Secret's credentials, or keep only ${
          CONNECTION_SECRET_KEYS.join(" and ")
        } in it`,
      );
    }
    // A public bucket (no-sign-request): the pod gets no keys, not even the driver's.
    if (unsigned) return { source, accessKeyId: "", secretAccessKey: "", anonymous: true };
    const accessKeyId = driverEnv("AWS_ACCESS_KEY_ID")?.trim();
    const secretAccessKey = driverEnv("AWS_SECRET_ACCESS_KEY")?.trim();
    const sessionToken = driverEnv("AWS_SESSION_TOKEN")?.trim() || undefined;
    const problem = checkKeys(
      "Driver credentials",
      accessKeyId,
      secretAccessKey,
      sessionToken,
    );
    if (problem) {
      throw failedPrecondition(
        `${problem}. Configure the driver's credential Secret (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY of the node plugin), or use authenticationSource: secret`,
      );
    }
    return {
      source,
      accessKeyId: accessKeyId!,
      secretAccessKey: secretAccessKey!,
      ...(sessionToken ? { sessionToken } : {}),
    };
  }
  if (given.length === 0) {
    throw invalidArgument(
      `authenticationSource is "secret" but kubelet sent no node-publish secrets: set spec.csi.nodePublishSecretRef on the PersistentVolume, or nodePublishSecretRef on the pod's inline csi volume (keys ${SECRET_KEYS.accessKeyId}, ${SECRET_KEYS.secretAccessKey}) and make sure the Secret exists`,
    );
  }
  const s = secrets ?? {};
  const accessKeyId = s[SECRET_KEYS.accessKeyId]?.trim();
  const secretAccessKey = s[SECRET_KEYS.secretAccessKey]?.trim();
  const sessionToken = s[SECRET_KEYS.sessionToken]?.trim() || undefined;
  const problem = checkKeys("Node-publish Secret", accessKeyId, secretAccessKey, sessionToken);
  if (problem) {
    throw invalidArgument(
      `${problem}. The Secret must hold keys ${SECRET_KEYS.accessKeyId} and ${SECRET_KEYS.secretAccessKey} (got keys: ${
        given.sort().join(", ")
      })`,
    );
  }
  return {
    source,
    accessKeyId: accessKeyId!,
    secretAccessKey: secretAccessKey!,
    ...(sessionToken ? { sessionToken } : {}),
  };
}

/**
 * With `authenticationSource: pod` the credentials come from STS (`pod_identity.ts`): the
 * node-publish Secret may hold only the connection keys.
 * @throws {CsiError} InvalidArgument
 */
export function refuseCredentialKeys(
  secrets: Readonly<Record<string, string>> | null | undefined,
): void {
  const keys = Object.keys(secrets ?? {}).filter((k) => !CONNECTION_SECRET_KEYS.includes(k));
  if (keys.length > 0) {
    throw invalidArgument(
      `The volume's node-publish Secret has keys ${
        keys.sort().join(", ")
      } but authenticationSource is "pod" (credentials of the workload's ServiceAccount): keep only ${
        CONNECTION_SECRET_KEYS.join(" and ")
      } in it, or use authenticationSource: secret`,
    );
  }
}

/** The shared-credentials file content. */
export function credentialsFileText(c: S3Credentials): string {
  const lines = [
    `[${PROFILE_NAME}]`,
    `aws_access_key_id=${c.accessKeyId}`,
    `aws_secret_access_key=${c.secretAccessKey}`,
  ];
  if (c.sessionToken) lines.push(`aws_session_token=${c.sessionToken}`);
  return `${lines.join("\n")}\n`;
}

/** The config file content. */
export function configFileText(): string {
  return `[profile ${PROFILE_NAME}]\n`;
}

/** Environment that points the engine at the credential files, as seen inside the pod. */
export function credentialsEnv(commDir: string = COMM_DIR): string[] {
  const dir = `${commDir}/${CREDENTIALS_DIR}`;
  return [
    `AWS_CONFIG_FILE=${dir}/${CONFIG_FILE}`,
    `AWS_PROFILE=${PROFILE_NAME}`,
    `AWS_SHARED_CREDENTIALS_FILE=${dir}/${CREDENTIALS_FILE}`,
  ];
}

/** Bytes of the credentials file read back by {@link readAccessKeyId} (it is a few lines). */
const CREDENTIALS_READ_BYTES = 8192;

/**
 * The access key id in the pod's credentials file (to redact it from what the pod reports), read
 * bounded, never following a link; undefined when absent or unreadable. The pod may have changed
 * the file: the value only ever hides text, it is never used as a credential.
 */
export async function readAccessKeyId(comm: DirHandle): Promise<string | undefined> {
  try {
    using dir = await comm.subdir(CREDENTIALS_DIR);
    const text = await dir?.readFile(CREDENTIALS_FILE, { maxBytes: CREDENTIALS_READ_BYTES });
    return /^aws_access_key_id=(\S+)$/m.exec(text ?? "")?.[1];
  } catch (err) {
    if (err instanceof UnsafeEntryError) return undefined;
    throw err;
  }
}

/** The engine's credential environment: none for {@link S3Credentials.anonymous} ones. */
export function engineCredentialsEnv(creds: S3Credentials): string[] {
  return creds.anonymous ? [] : credentialsEnv();
}

/**
 * Write the credential files into the comm dir's `credentials/` (created 0700 and owned by the
 * pod's user, through its descriptor), each 0600 and owned by the pod's user; for
 * {@link S3Credentials.anonymous} ones, remove any there instead.
 * @throws {UnsafeEntryError} when the pod put something other than a directory there
 */
export async function writeCredentials(
  comm: DirHandle,
  creds: S3Credentials,
  user: { uid: number; gid: number },
): Promise<void> {
  if (creds.anonymous) {
    await removeCredentials(comm);
    return;
  }
  using dir = (await comm.subdir(CREDENTIALS_DIR, { create: { mode: 0o700 } }))!;
  await dir.setOwner(user.uid, user.gid, 0o700);
  const opts = { mode: 0o600, uid: user.uid, gid: user.gid };
  await dir.writeFile(CREDENTIALS_FILE, credentialsFileText(creds), opts);
  await dir.writeFile(CONFIG_FILE, configFileText(), opts);
}

/**
 * Remove the credential files and their directory from the comm dir, never following a link and
 * never listing the directory (the pod can fill it with any number of names): the two files this
 * plugin writes are unlinked by name, then the directory is removed if it is empty. Anything the
 * pod added keeps it (it holds no credentials any more, and it goes with the pod's emptyDir). A
 * link or file planted in place of the directory is removed itself. Returns whether anything was
 * there.
 */
export async function removeCredentials(comm: DirHandle): Promise<boolean> {
  let dir: DirHandle | undefined;
  try {
    dir = await comm.subdir(CREDENTIALS_DIR);
  } catch (err) {
    if (!(err instanceof UnsafeEntryError)) throw err;
    return await comm.remove(CREDENTIALS_DIR);
  }
  if (!dir) return false;
  try {
    for (const name of [CREDENTIALS_FILE, CONFIG_FILE]) {
      await dir.remove(name).catch(() => false); // a directory planted there stays
    }
  } finally {
    dir.close();
  }
  await comm.remove(CREDENTIALS_DIR, { directory: true }).catch(() => false); // ENOTEMPTY: left
  return true;
}
