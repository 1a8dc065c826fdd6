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

/** Longest bucket name. */
export const MAX_BUCKET_NAME = 63;
/** Longest `bucketNamePrefix`, so that a name always keeps 30 characters of its own. */
export const MAX_BUCKET_NAME_PREFIX = 32;

const RESERVED_PREFIXES = ["xn--", "sthree-", "amzn-s3-demo-"];
const RESERVED_SUFFIXES = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];

/** Why `name` is not a valid bucket name, or undefined when it is. */
export function bucketNameProblem(name: string): string | undefined {
  if (name.length < 3 || name.length > MAX_BUCKET_NAME) {
    return `must be 3 to ${MAX_BUCKET_NAME} characters long (got ${name.length})`;
  }
  if (!/^[a-z0-9.-]+$/.test(name)) {
    return "may contain only lowercase letters, digits, '.' and '-'";
  }
  if (!/^[a-z0-9]/.test(name) || !/[a-z0-9]$/.test(name)) {
    return "must start and end with a lowercase letter or a digit";
  }
  if (name.includes("..")) return "must not contain '..'";
  if (/^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)) {
    return "must not look like an IP address";
  }
  const pre = RESERVED_PREFIXES.find((p) => name.startsWith(p));
  if (pre) return `must not start with the reserved prefix "${pre}"`;
  const suf = RESERVED_SUFFIXES.find((s) => name.endsWith(s));
  if (suf) return `must not end with the reserved suffix "${suf}"`;
  return undefined;
}

/** Why `prefix` cannot start generated bucket names, or undefined. */
export function bucketNamePrefixProblem(prefix: string): string | undefined {
  if (prefix.length > MAX_BUCKET_NAME_PREFIX) {
    return `must be at most ${MAX_BUCKET_NAME_PREFIX} characters long (got ${prefix.length})`;
  }
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(prefix)) {
    return "must start with a lowercase letter or digit and contain only lowercase letters, digits, '.' and '-'";
  }
  if (prefix.includes("..")) return "must not contain '..'";
  const pre = RESERVED_PREFIXES.find((p) => prefix.startsWith(p) || p.startsWith(prefix + "-"));
  if (pre && prefix.startsWith(pre)) return `must not start with the reserved prefix "${pre}"`;
  return undefined;
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
