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
import {
  BASE_PREFIX_RULES,
  DELETE_POLICIES,
  type DeletePolicy,
  EXTRA_METADATA,
  KNOWN_PARAMETERS,
  type Mode,
  MODES,
  PARAM,
  PARAMETER_AUTH_SOURCES,
  PARAMETER_MESSAGES as M,
  REGION_PATTERN,
} from "../options/storage_class_parameters.ts";
import { fill } from "../util/message_template.ts";
import { valueProblem } from "../util/value_rules.ts";
import { bucketNamePrefixProblem, bucketNameProblem } from "./bucket_naming.ts";

export { DELETE_POLICIES, type DeletePolicy, EXTRA_METADATA, type Mode, MODES, PARAM };

/** Parameters passed to the volume context as they are (the local cache of the volume). */
export const PASSTHROUGH: readonly string[] = Object.values(CACHE_ATTRIBUTES);

const KNOWN = new Set(KNOWN_PARAMETERS);

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
    throw invalidArgument(fill(M.oneOf, { key, value, allowed: allowed.join(", ") }));
  }
  return value as T;
}

/** Why `p` cannot be a base prefix, or undefined. */
export function basePrefixProblem(p: string): string | undefined {
  return p === "" ? undefined : valueProblem(BASE_PREFIX_RULES, p);
}

/** The first unknown key (in sorted order) and how many there are, or undefined. */
export function unknownParameterProblem(keys: readonly string[]): string | undefined {
  const unknown = keys.filter((k) => !KNOWN.has(k)).sort();
  if (unknown.length === 0) return undefined;
  return fill(M.unknown, {
    first: unknown[0]!,
    more: unknown.length > 1 ? fill(M.unknownMore, { count: unknown.length - 1 }) : "",
    allowed: Object.values(PARAM).join(", "),
  });
}

/**
 * Parse and check CreateVolume parameters.
 * @throws {CsiError} InvalidArgument naming the parameter and what to write instead
 */
export function parseParameters(
  params: Readonly<Record<string, string>> | null | undefined,
): VolumeParams {
  const p = params ?? {};
  const unknown = unknownParameterProblem(Object.keys(p));
  if (unknown !== undefined) throw invalidArgument(unknown);
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
    if (!bucketName) throw invalidArgument(M.prefixNeedsBucket);
    const problem = bucketNameProblem(bucketName);
    if (problem) throw invalidArgument(fill(M.bucketName, { value: bucketName, problem }));
    if (bucketNamePrefix) throw invalidArgument(M.prefixNoBucketNamePrefix);
    const bp = basePrefixProblem(basePrefix);
    if (bp) throw invalidArgument(fill(M.basePrefix, { value: basePrefix, problem: bp }));
  } else {
    if (bucketName) throw invalidArgument(M.bucketNoBucketName);
    if (basePrefix) throw invalidArgument(M.bucketNoBasePrefix);
    const problem = bucketNamePrefix ? bucketNamePrefixProblem(bucketNamePrefix) : undefined;
    if (problem) {
      throw invalidArgument(fill(M.bucketNamePrefix, { value: bucketNamePrefix, problem }));
    }
  }
  const region = p[PARAM.region] || undefined;
  if (region !== undefined && !new RegExp(REGION_PATTERN).test(region)) {
    throw invalidArgument(fill(M.region, { value: region }));
  }
  const auth = p[PARAM.authenticationSource] || undefined;
  const authenticationSource = auth === undefined
    ? undefined
    : oneOf(PARAM.authenticationSource, auth, PARAMETER_AUTH_SOURCES);
  const engine = p[PARAM.engine] || undefined;
  if (engine !== undefined) oneOf(PARAM.engine, engine, ENGINES);
  const passthrough: Record<string, string> = {};
  for (const k of PASSTHROUGH) if (p[k]) passthrough[k] = p[k];
  try {
    parseCacheConfig(passthrough, false, "parameter");
  } catch (err) {
    if (err instanceof CacheConfigError) {
      throw invalidArgument(fill(M.cache, { problem: err.message }));
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
