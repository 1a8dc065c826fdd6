/**
 * The words of every refusal a volume's own definition can earn (its mount options, its volume
 * attributes, their combinations, its engine): written once, filled by the node plugin in
 * NodePublishVolume and by the admission policy at `kubectl apply` (CEL), so both say the same.
 * Templates use `{name}` placeholders (`src/util/message_template.ts`).
 *
 * @module
 */

/** Mount option entries (`src/node/mount_options.ts`). */
export const OPTION_MESSAGES = {
  tooMany: "A volume may have at most {max} mount options (it has {count}): remove some",
  control: `Mount option "{shown}" contains control characters (e.g. a newline): remove them`,
  notAllowed: `Mount option "{entry}" is not allowed: {reason}`,
  unsupported:
    `Mount option "{entry}" is not supported; remove it from the PersistentVolume's mountOptions (supported: {supported})`,
  duplicate: `Mount option "{name}" is given more than once`,
  takesNoValue: `Mount option "{name}" takes no value, got "{value}"`,
  needsValue: `Mount option "{name}" needs a value, e.g. "{name}=..."`,
  invalid: `Mount option "{name}={value}" is invalid: {problem}`,
} as const;

/** Volume attributes and their combination with options (`src/node/publish_request.ts`). */
export const ATTRIBUTE_MESSAGES = {
  bucketMissing:
    "Bucket name not provided: set volumeAttributes.bucketName on the PersistentVolume (or the pod's inline csi volume)",
  bucketInvalid: `Bucket name "{bucket}" is not a valid S3 bucket name`,
  authUnknown:
    `Unknown authenticationSource "{auth}": use "driver" (default), "secret" (with nodePublishSecretRef) or "pod" (the workload's ServiceAccount)`,
  mountOptionsAttribute:
    `Volume attribute "{name}" is for inline volumes: set spec.mountOptions of the PersistentVolume instead`,
  podNeedsMountS3:
    `authenticationSource "pod" needs engine mount-s3: rclone reads credentials once and cannot follow their renewal`,
  engineUnknown: `Unknown engine "{engine}": use one of {engines}`,
  conflict:
    `Volume attribute "{name}" ("{value}") conflicts with mount option "{name}={option}"; set it in one place`,
} as const;

/** Options the engine or the driver refuses together (`combinationProblem`). */
export const COMBINATION_MESSAGES = {
  /** `{hasSse}` is "" or ` (the volume has sse=X)`. */
  kmsNeedsSse:
    `Mount option "sse-kms-key-id={key}" needs "sse=aws:kms" or "sse=aws:kms:dsse"{hasSse}: add or fix the sse option`,
  kmsHasSse: " (the volume has sse={sse})",
  noLog:
    `Mount option "no-log" cannot be combined with "debug", "debug-crt" or "log-metrics": remove one of them`,
  allowOtherAndRoot:
    `Mount options "allow-other" and "allow-root" cannot be combined (allow-other already admits root): keep one`,
  otlpInterval:
    `Mount option "otlp-export-interval={interval}" needs "otlp-endpoint=<URL>": add it or remove the interval`,
  unsignedSecret:
    `Mount option "no-sign-request" sends no credentials but the volume has authenticationSource: secret: remove one of them`,
} as const;

/**
 * The local cache (`src/mppod/cache_volume.ts`). `{attribute}` is "Volume attribute" for a volume
 * and "parameter" for a StorageClass.
 */
export const CACHE_MESSAGES = {
  notPositive:
    `{attribute} {name}="{value}" is not a positive size: use a Kubernetes quantity such as 2Gi`,
  both:
    `The cache is configured both by the mount option "cache" and the volume attribute {cache}="{type}": remove the mount option (its path is not used)`,
  stray: "{attribute} {name} is set but {cache} is not: add {cache}: {type}",
  notForEmptyDir: "{attribute} {name} applies to {cache}: ephemeral, not emptyDir: remove it",
  medium:
    `{attribute} {name}="{value}" is not supported: use Memory (tmpfs) or leave it out (the node's disk)`,
  notForEphemeral: "{attribute} {name} applies to {cache}: emptyDir, not ephemeral: remove it",
  ephemeralNeeds:
    "{cache}: ephemeral needs both {storageClass} (the StorageClass of the cache volume) and {request} (its size, e.g. 10Gi)",
  storageClass: `{attribute} {name}="{value}" is not a StorageClass name`,
  type: `{attribute} {cache}="{value}" is not a cache type: use {types}`,
  tooSmall: `{attribute} {name}="{value}" is too small for a cache: use at least 2Mi`,
  exceeds:
    `Mount option max-cache-size={requested} (MiB) exceeds {name}="{value}" ({limit} MiB): lower max-cache-size or raise the limit`,
  exceedsDefault:
    `Mount option max-cache-size={requested} (MiB) exceeds the default cache size limit "{value}" ({limit} MiB) of a cache without {name}: lower max-cache-size or set {name}`,
  needsCache:
    `Mount option "max-cache-size={requested}" needs a local cache: set the volume attribute {cache} (emptyDir or ephemeral)`,
} as const;

/** The rclone engine (`src/mppod/engine_support.ts`). */
export const RCLONE_MESSAGES = {
  /** `{why}` is "" or ` (reason)`. */
  option:
    `The rclone engine cannot honour the mount option "{option}"{why}: remove it from the volume's mountOptions or use the mount-s3 engine`,
  value:
    `The rclone engine cannot honour "{name}={value}" (only {only}): use the mount-s3 engine or {name}={first}`,
  writable:
    "The rclone engine cannot refuse {what} (mount-s3 does without {missing}): add {missing} to the volume's mountOptions, mount it read-only, or use the mount-s3 engine",
} as const;
