/**
 * The StorageClass parameters of dynamic provisioning (`docs/provisioning.md`) as data: names,
 * allowed values, the rules of bucket names and prefixes, and the words of every refusal. The
 * provisioner checks CreateVolume's parameters with them (`src/provisioning/parameters.ts`) and
 * the admission policy checks a StorageClass of this driver at `kubectl apply` with the same
 * rules and words (`src/deploy/render_volume_policy.ts`).
 *
 * @module
 */
import { CACHE_ATTRIBUTES } from "../mppod/cache_volume.ts";
import { ANY_CHAR, type ValueRule } from "../util/value_rules.ts";

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

/** Keys `csi-provisioner --extra-create-metadata` adds; recorded as bucket tags. */
export const EXTRA_METADATA = {
  pvcName: "csi.storage.k8s.io/pvc/name",
  pvcNamespace: "csi.storage.k8s.io/pvc/namespace",
  pvName: "csi.storage.k8s.io/pv/name",
} as const;

/**
 * Keys the csi-provisioner sidecar reads and normally strips (secret references, fstype), harmless
 * when present (older sidecars, tests); a StorageClass may hold them.
 */
export const TOLERATED: readonly string[] = [
  "csi.storage.k8s.io/fstype",
  ...[
    "provisioner",
    "node-publish",
    "controller-publish",
    "node-stage",
    "controller-expand",
    "node-expand",
  ].flatMap((
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
];

/** Every key a StorageClass may hold. */
export const KNOWN_PARAMETERS: readonly string[] = [
  ...Object.values(PARAM),
  ...Object.values(EXTRA_METADATA),
  ...TOLERATED,
];

/** Volume layout. */
export type Mode = "bucket" | "prefix";
/** What DeleteVolume does with the data. */
export type DeletePolicy = "retain" | "delete-if-empty" | "delete-all";
/** Modes. */
export const MODES: readonly Mode[] = ["bucket", "prefix"];
/** Delete policies. */
export const DELETE_POLICIES: readonly DeletePolicy[] = ["retain", "delete-if-empty", "delete-all"];
/** Authentication sources a class may name. */
export const PARAMETER_AUTH_SOURCES = ["driver", "secret"] as const;

/** A region name. */
export const REGION_PATTERN = "^[a-z0-9-]{1,32}$";

/** Longest bucket name. */
export const MAX_BUCKET_NAME = 63;
/** Longest `bucketNamePrefix`, so that a name always keeps 30 characters of its own. */
export const MAX_BUCKET_NAME_PREFIX = 32;
/** Reserved starts of bucket names. */
export const RESERVED_PREFIXES = ["xn--", "sthree-", "amzn-s3-demo-"] as const;
/** Reserved ends of bucket names. */
export const RESERVED_SUFFIXES = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"] as const;

function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * AWS general purpose bucket names (which S3-compatible servers accept): 3–63 characters of
 * `a-z 0-9 . -`, starting and ending with a letter or digit, no `..`, not an IPv4 address, no
 * reserved prefix or suffix.
 */
export const BUCKET_NAME_RULES: readonly ValueRule[] = [
  {
    match: `^${ANY_CHAR}{3,${MAX_BUCKET_NAME}}$`,
    message: `must be 3 to ${MAX_BUCKET_NAME} characters long (got {length})`,
  },
  { match: "^[a-z0-9.-]+$", message: "may contain only lowercase letters, digits, '.' and '-'" },
  {
    match: "^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$",
    message: "must start and end with a lowercase letter or a digit",
  },
  { reject: "[.][.]", message: "must not contain '..'" },
  {
    reject: "^[0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}$",
    message: "must not look like an IP address",
  },
  ...RESERVED_PREFIXES.map((p) => ({
    reject: `^${literal(p)}`,
    message: `must not start with the reserved prefix "${p}"`,
  })),
  ...RESERVED_SUFFIXES.map((s) => ({
    reject: `${literal(s)}$`,
    message: `must not end with the reserved suffix "${s}"`,
  })),
];

/** `bucketNamePrefix`: the start of generated bucket names. */
export const BUCKET_NAME_PREFIX_RULES: readonly ValueRule[] = [
  {
    match: `^${ANY_CHAR}{0,${MAX_BUCKET_NAME_PREFIX}}$`,
    message: `must be at most ${MAX_BUCKET_NAME_PREFIX} characters long (got {length})`,
  },
  {
    match: "^[a-z0-9][a-z0-9.-]*$",
    message:
      "must start with a lowercase letter or digit and contain only lowercase letters, digits, '.' and '-'",
  },
  { reject: "[.][.]", message: "must not contain '..'" },
  ...RESERVED_PREFIXES.map((p) => ({
    reject: `^${literal(p)}`,
    message: `must not start with the reserved prefix "${p}"`,
  })),
];

/** `basePrefix` (non-empty): the key prefix under which `prefix` mode makes volumes. */
export const BASE_PREFIX_RULES: readonly ValueRule[] = [
  {
    match: `^${ANY_CHAR}{0,40}$`,
    message: "must be at most 40 characters long (got {length})",
  },
  {
    match: "^[A-Za-z0-9!_.*'()/-]+$",
    message: "may contain only letters, digits and ! _ . * ' ( ) / -",
  },
  {
    match: "^[^/][^\\x00-\\x1f\\x7f]*/$",
    message: 'must not start with "/" and must end with "/"',
  },
  { reject: "(^|/)[.]{0,2}/", message: 'must not contain empty, "." or ".." segments' },
];

/** The words of every refusal of a StorageClass's parameters (`{name}` placeholders). */
export const PARAMETER_MESSAGES = {
  /** `{more}` is "" or ` (and N more)`. */
  unknown:
    `Unknown StorageClass parameter "{first}"{more}: allowed are {allowed} (see docs/provisioning.md)`,
  unknownMore: " (and {count} more)",
  oneOf: `StorageClass parameter {key}: "{value}" is not one of {allowed}`,
  prefixNeedsBucket:
    `StorageClass parameter bucketName is required with mode "prefix": name the existing bucket that holds the volumes`,
  bucketName: `StorageClass parameter bucketName "{value}" {problem}`,
  prefixNoBucketNamePrefix:
    `StorageClass parameter bucketNamePrefix applies to mode "bucket" only; with mode "prefix" use basePrefix`,
  basePrefix: `StorageClass parameter basePrefix "{value}" {problem}`,
  bucketNoBucketName:
    `StorageClass parameter bucketName applies to mode "prefix" only (mode "bucket" creates one bucket per volume; use bucketNamePrefix to choose how their names start)`,
  bucketNoBasePrefix: `StorageClass parameter basePrefix applies to mode "prefix" only`,
  bucketNamePrefix: `StorageClass parameter bucketNamePrefix "{value}" {problem}`,
  region: `StorageClass parameter region "{value}" is not a region name such as us-east-1`,
  cache: "StorageClass parameters: {problem}",
} as const;
