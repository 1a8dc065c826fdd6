/**
 * Deterministic S3 bucket names for dynamically provisioned volumes: the same CreateVolume name
 * (and `bucketNamePrefix`) always yields the same bucket, so a retried CreateVolume finds the bucket
 * of the first attempt instead of leaking a new one (upstream uses a random UUID per call).
 *
 * Rules enforced (AWS general purpose buckets, which S3-compatible servers accept): 3–63
 * characters of `a-z 0-9 . -`, starting and ending with a letter or digit, no `..`, not an IPv4
 * address, no `xn--`/`sthree-` prefix, no `-s3alias`/`--ol-s3`/`.mrap`/`--x-s3` suffix.
 *
 * @module
 */
import { createHash } from "node:crypto";
import {
  BUCKET_NAME_PREFIX_RULES,
  BUCKET_NAME_RULES,
  MAX_BUCKET_NAME,
  MAX_BUCKET_NAME_PREFIX,
} from "../options/storage_class_parameters.ts";
import { valueProblem } from "../util/value_rules.ts";

export { MAX_BUCKET_NAME, MAX_BUCKET_NAME_PREFIX };

/** Why `name` is not a valid bucket name, or undefined when it is. */
export function bucketNameProblem(name: string): string | undefined {
  return valueProblem(BUCKET_NAME_RULES, name);
}

/** Why `prefix` cannot start generated bucket names, or undefined. */
export function bucketNamePrefixProblem(prefix: string): string | undefined {
  return valueProblem(BUCKET_NAME_PREFIX_RULES, prefix);
}

function shortHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 10);
}

/**
 * The bucket for CreateVolume `name` with `prefix` (already validated). Names that are valid as they
 * are stay readable (`pvc-<uid>` → `<prefix>pvc-<uid>`); anything else is lower-cased, stripped of
 * invalid characters and, when too long or changed, shortened and suffixed with a hash of the
 * original name so that different names never share a bucket.
 */
export function bucketNameFor(name: string, prefix = ""): string {
  const plain = prefix + name;
  if (bucketNameProblem(plain) === undefined) return plain;
  let cleaned = name.toLowerCase().replace(/[^a-z0-9.-]+/g, "-").replace(/\.{2,}/g, ".")
    .replace(/^[.-]+|[.-]+$/g, "");
  const hash = shortHash(name);
  const room = MAX_BUCKET_NAME - prefix.length - hash.length - 1;
  cleaned = cleaned.slice(0, Math.max(0, room)).replace(/[.-]+$/g, "");
  const candidate = cleaned ? `${prefix}${cleaned}-${hash}` : `${prefix}${hash}`;
  // Reserved starts/ends (e.g. a name beginning "xn--") fall back to the hash alone.
  return bucketNameProblem(candidate) === undefined ? candidate : `${prefix}v-${hash}`;
}
