/**
 * StorageClass parameters of dynamic provisioning (`docs/provisioning.md`), as they arrive in
 * CreateVolume after `csi-provisioner` removed its own `csi.storage.k8s.io/*` keys. Unknown keys are
 * refused (a typo such as `deletepolicy` must not silently fall back to a default that deletes or
 * keeps data the user did not expect).
 *
 * Pure: unit-tested without I/O.
 *
 * @module
 */
import { invalidArgument } from "../csi/errors.ts";
import { ENGINES } from "../mppod/mount_message.ts";
import { CACHE_ATTRIBUTES, CacheConfigError, parseCacheConfig } from "../mppod/cache_volume.ts";
import { bucketNamePrefixProblem, bucketNameProblem } from "./bucket_naming.ts";

/** StorageClass parameter names. */
export const PARAM = {
  mode: "mode",
  bucketName: "bucketName",
  bucketNamePrefix: "bucketNamePrefix",
  basePrefix: "basePrefix",
  deletePolicy: "deletePolicy",
  region: "region",
  authenticationSource: "authenticationSource",
  engine: "engine",
  cache: CACHE_ATTRIBUTES.cache,
  cacheEmptyDirSizeLimit: CACHE_ATTRIBUTES.emptyDirSizeLimit,
  cacheEmptyDirMedium: CACHE_ATTRIBUTES.emptyDirMedium,
  cacheEphemeralStorageClassName: CACHE_ATTRIBUTES.ephemeralStorageClassName,
  cacheEphemeralStorageResourceRequest: CACHE_ATTRIBUTES.ephemeralStorageResourceRequest,
} as const;

/** Parameters passed to the volume context as they are (the local cache of the volume). */
export const PASSTHROUGH: readonly string[] = Object.values(CACHE_ATTRIBUTES);

/** Keys `csi-provisioner --extra-create-metadata` adds; recorded as bucket tags. */
export const EXTRA_METADATA = {
  pvcName: "csi.storage.k8s.io/pvc/name",
  pvcNamespace: "csi.storage.k8s.io/pvc/namespace",
  pvName: "csi.storage.k8s.io/pv/name",
} as const;

/** Keys the sidecar normally strips but that are harmless when present (older sidecars, tests). */
const TOLERATED = new Set([
  "csi.storage.k8s.io/fstype",
  ...["provisioner", "node-publish", "controller-publish", "node-stage", "controller-expand"]
    .flatMap((
      t,
    ) => [`csi.storage.k8s.io/${t}-secret-name`, `csi.storage.k8s.io/${t}-secret-namespace`]),
  "csi.storage.k8s.io/secret-name",
  "csi.storage.k8s.io/secret-namespace",
  // Deprecated un-prefixed secret keys: the sidecar honours them and leaves them in parameters.
  "csiProvisionerSecretName",
  "csiProvisionerSecretNamespace",
  "csiNodePublishSecretName",
  "csiNodePublishSecretNamespace",
  "csiControllerPublishSecretName",
  "csiControllerPublishSecretNamespace",
  "csiNodeStageSecretName",
  "csiNodeStageSecretNamespace",
]);

/** Volume layout. */
export type Mode = "bucket" | "prefix";
/** What DeleteVolume does with the data. */
export type DeletePolicy = "retain" | "delete-if-empty" | "delete-all";
/** Modes. */
export const MODES: readonly Mode[] = ["bucket", "prefix"];
/** Delete policies. */
export const DELETE_POLICIES: readonly DeletePolicy[] = ["retain", "delete-if-empty", "delete-all"];

/** Parsed parameters. */
export interface VolumeParams {
  /** Layout. */
  readonly mode: Mode;
  /** The existing bucket of `prefix` mode. */
  readonly bucketName: string | undefined;
  /** Start of generated bucket names (`bucket` mode). */
  readonly bucketNamePrefix: string;
  /** Key prefix under which volume prefixes are made (`prefix` mode), "" or ending in "/". */
  readonly basePrefix: string;
  /** What DeleteVolume does. */
  readonly deletePolicy: DeletePolicy;
  /** Region of the volume (else the driver's). */
  readonly region: string | undefined;
  /** Credentials the node uses (else: `secret` when provisioner secrets were given). */
  readonly authenticationSource: "driver" | "secret" | undefined;
  /** FUSE engine for the node. */
  readonly engine: string | undefined;
  /** Volume attributes copied to the volume context (the local cache), checked. */
  readonly passthrough: Readonly<Record<string, string>>;
  /** From `--extra-create-metadata`. */
  readonly pvcName: string | undefined;
  /** From `--extra-create-metadata`. */
  readonly pvcNamespace: string | undefined;
}

function oneOf<T extends string>(key: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw invalidArgument(
      `StorageClass parameter ${key}: "${value}" is not one of ${allowed.join(", ")}`,
    );
  }
  return value as T;
}

/** Why `p` cannot be a base prefix, or undefined. */
export function basePrefixProblem(p: string): string | undefined {
  if (p === "") return undefined;
  if (p.length > 40) return `must be at most 40 characters long (got ${p.length})`;
  if (!/^[A-Za-z0-9!_.*'()/-]+$/.test(p)) {
    return "may contain only letters, digits and ! _ . * ' ( ) / -";
  }
  if (p.startsWith("/") || !p.endsWith("/")) return 'must not start with "/" and must end with "/"';
  if (p.split("/").slice(0, -1).some((s) => s === "" || s === "." || s === "..")) {
    return 'must not contain empty, "." or ".." segments';
  }
  return undefined;
}

/**
 * Parse and check CreateVolume parameters.
 * @throws {CsiError} InvalidArgument naming the parameter and what to write instead
 */
export function parseParameters(
  params: Readonly<Record<string, string>> | null | undefined,
): VolumeParams {
  const p = params ?? {};
  const known = new Set<string>([...Object.values(PARAM), ...Object.values(EXTRA_METADATA)]);
  const unknown = Object.keys(p).filter((k) => !known.has(k) && !TOLERATED.has(k)).sort();
  if (unknown.length > 0) {
    throw invalidArgument(
      `Unknown StorageClass parameter(s) ${unknown.map((k) => `"${k}"`).join(", ")}: allowed are ${
        Object.values(PARAM).join(", ")
      } (see docs/provisioning.md)`,
    );
  }
  const mode = oneOf(PARAM.mode, p[PARAM.mode] || "bucket", MODES);
  const deletePolicy = oneOf(
    PARAM.deletePolicy,
    p[PARAM.deletePolicy] || "delete-if-empty",
    DELETE_POLICIES,
  );
  const bucketName = p[PARAM.bucketName] || undefined;
  const bucketNamePrefix = p[PARAM.bucketNamePrefix] ?? "";
  const basePrefix = p[PARAM.basePrefix] ?? "";
  if (mode === "prefix") {
    if (!bucketName) {
      throw invalidArgument(
        `StorageClass parameter bucketName is required with mode "prefix": name the existing bucket that holds the volumes`,
      );
    }
    const problem = bucketNameProblem(bucketName);
    if (problem) {
      throw invalidArgument(`StorageClass parameter bucketName "${bucketName}" ${problem}`);
    }
    if (bucketNamePrefix) {
      throw invalidArgument(
        `StorageClass parameter bucketNamePrefix applies to mode "bucket" only; with mode "prefix" use basePrefix`,
      );
    }
    const bp = basePrefixProblem(basePrefix);
    if (bp) throw invalidArgument(`StorageClass parameter basePrefix "${basePrefix}" ${bp}`);
  } else {
    if (bucketName) {
      throw invalidArgument(
        `StorageClass parameter bucketName applies to mode "prefix" only (mode "bucket" creates one bucket per volume; use bucketNamePrefix to choose how their names start)`,
      );
    }
    if (basePrefix) {
      throw invalidArgument(`StorageClass parameter basePrefix applies to mode "prefix" only`);
    }
    const problem = bucketNamePrefix ? bucketNamePrefixProblem(bucketNamePrefix) : undefined;
    if (problem) {
      throw invalidArgument(
        `StorageClass parameter bucketNamePrefix "${bucketNamePrefix}" ${problem}`,
      );
    }
  }
  const region = p[PARAM.region] || undefined;
  if (region !== undefined && !/^[a-z0-9-]{1,32}$/.test(region)) {
    throw invalidArgument(
      `StorageClass parameter region "${region}" is not a region name such as us-east-1`,
    );
  }
  const auth = p[PARAM.authenticationSource] || undefined;
  const authenticationSource = auth === undefined
    ? undefined
    : oneOf(PARAM.authenticationSource, auth, ["driver", "secret"] as const);
  const engine = p[PARAM.engine] || undefined;
  if (engine !== undefined) oneOf(PARAM.engine, engine, ENGINES);
  const passthrough: Record<string, string> = {};
  for (const k of PASSTHROUGH) if (p[k]) passthrough[k] = p[k];
  try {
    parseCacheConfig(passthrough, false);
  } catch (err) {
    if (err instanceof CacheConfigError) {
      throw invalidArgument(
        `StorageClass parameters: ${err.message.replace(/Volume attribute/g, "parameter")}`,
      );
    }
    throw err;
  }
  return {
    mode,
    bucketName,
    bucketNamePrefix,
    basePrefix,
    deletePolicy,
    region,
    authenticationSource,
    engine,
    passthrough,
    pvcName: p[EXTRA_METADATA.pvcName] || undefined,
    pvcNamespace: p[EXTRA_METADATA.pvcNamespace] || undefined,
  };
}
