/**
 * Mount options of a volume: the PV's `spec.mountOptions` (CSI `mount_flags`) in mount-s3 syntax,
 * parsed and checked against an allow-list. Anything not allowed is **rejected** with
 * InvalidArgument naming the option and why — never silently dropped (upstream strips several
 * options with only a log line; a user then wonders why their option had no effect).
 *
 * Syntax (as upstream): each entry is `name`, `name=value` or `name value`, optionally with leading
 * dashes; the name is split at the first `=` or space.
 *
 * @module
 */
import { invalidArgument } from "../csi/errors.ts";

// deno-lint-ignore no-control-regex
const CONTROL_REGEXP = /[\x00-\x1f\x7f]/;

/** Parsed options: name (without dashes) → value, or `true` for a flag. */
export type MountOptions = Map<string, string | true>;

type Check = (value: string) => string | undefined;

const integer = (max: number, min = 0): Check => (v) =>
  /^\d{1,10}$/.test(v) && Number(v) <= max && Number(v) >= min
    ? undefined
    : `must be an integer from ${min} to ${max}`;
/** Part sizes as mount-s3 takes them: bytes, 5 MiB to 5 GiB. */
const partSize: Check = (v) =>
  /^\d{1,10}$/.test(v) && Number(v) >= 5 * 2 ** 20 && Number(v) <= 5 * 2 ** 30
    ? undefined
    : "must be a size in bytes from 5242880 (5 MiB) to 5368709120 (5 GiB)";
const octalMode: Check = (v) =>
  /^0?[0-7]{3}$/.test(v) ? undefined : `must be an octal mode such as 0750`;
const ttl: Check = (v) =>
  /^\d{1,9}$/.test(v) || v === "indefinite" || v === "minimal"
    ? undefined
    : `must be a number of seconds, "indefinite" or "minimal"`;
const pattern = (re: RegExp, what: string): Check => (v) => re.test(v) ? undefined : what;
const prefixCheck: Check = (v) => {
  if (v === "" || v.startsWith("/") || !v.endsWith("/")) {
    return `must be a key prefix that does not start with "/" and ends with "/", e.g. "data/"`;
  }
  if (v.split("/").some((s) => s === ".." || s === ".")) return `must not contain "." or ".."`;
  // deno-lint-ignore no-control-regex
  if (/[\x00-\x1f\x7f]/.test(v)) return "must not contain control characters";
  return undefined;
};

/** An allowed option: `undefined` check = a flag without value. */
interface Allowed {
  readonly value?: Check;
}

/** Options a PV may set, with their value checks. */
export const ALLOWED_OPTIONS: Readonly<Record<string, Allowed>> = {
  "read-only": {},
  "allow-delete": {},
  "allow-overwrite": {},
  "allow-other": {},
  "allow-root": {},
  "force-path-style": {},
  "debug": {},
  "debug-crt": {},
  "no-log": {},
  "uid": { value: integer(2 ** 31 - 1) },
  "gid": { value: integer(2 ** 31 - 1) },
  "dir-mode": { value: octalMode },
  "file-mode": { value: octalMode },
  "prefix": { value: prefixCheck },
  "region": { value: pattern(/^[a-z0-9-]{1,32}$/, "must be a region name such as us-east-1") },
  "metadata-ttl": { value: ttl },
  "negative-metadata-ttl": { value: ttl },
  // Deprecated (upstream v1): enables an emptyDir cache without a size limit; the path is not
  // used (the cache goes to the Mountpoint Pod's cache volume). Prefer the `cache` attribute.
  "cache": { value: pattern(/^.{1,256}$/, "must be a path of at most 256 characters") },
  "max-cache-size": { value: integer(2 ** 31 - 1) },
  "storage-class": { value: pattern(/^[A-Z_]{1,40}$/, "must be a storage class such as STANDARD") },
  "sse": {
    value: pattern(/^(aws:kms|aws:kms:dsse|AES256)$/, "must be aws:kms, aws:kms:dsse or AES256"),
  },
  "sse-kms-key-id": { value: pattern(/^[A-Za-z0-9:/_.-]{1,256}$/, "must be a KMS key id or ARN") },
  "max-threads": { value: integer(4096, 1) },
  "part-size": { value: partSize },
  "read-part-size": { value: partSize },
  "write-part-size": { value: partSize },
  "upload-checksums": { value: pattern(/^(crc32c|off)$/, "must be crc32c or off") },
  "maximum-throughput-gbps": {
    value: (v) =>
      /^\d{1,4}(\.\d{1,3})?$/.test(v) && Number(v) > 0 && Number(v) <= 10_000
        ? undefined
        : "must be a positive number of Gbit/s such as 10",
  },
  "aws-max-attempts": { value: integer(100, 1) },
};

/** Options that are refused on purpose, with the reason shown to the user. */
export const REFUSED_OPTIONS: Readonly<Record<string, string>> = {
  "endpoint-url":
    "a volume's own endpoint comes from its node-publish Secret (key endpoint), the driver's from its configuration",
  "profile": "AWS profiles are not supported: use authenticationSource driver, secret or pod",
  "ca-bundle": "the CA bundle is configured for the whole driver",
  "user-agent-prefix": "the driver sets the user agent",
  "foreground": "the driver always runs the engine in the foreground",
  "f": "the driver always runs the engine in the foreground",
  "help": "not a mount option",
  "h": "not a mount option",
  "version": "not a mount option",
  "v": "not a mount option",
  "o": "FUSE -o options are not supported; use the mount-s3 options",
  "cache-xz": "S3 Express One Zone shared caches are not supported",
  "incremental-upload": "incremental upload (S3 Express append) is not supported",
  "auto-unmount": "the driver manages unmounting",
  "bind": "the driver manages bind mounts",
};

/** Split one entry into name and value (`undefined` for a flag). */
function splitEntry(entry: string): [string, string | undefined] {
  const trimmed = entry.trim();
  const eq = trimmed.indexOf("=");
  const sp = trimmed.indexOf(" ");
  const cut = eq < 0 ? sp : sp < 0 ? eq : Math.min(eq, sp);
  const rawName = cut < 0 ? trimmed : trimmed.slice(0, cut);
  const value = cut < 0 ? undefined : trimmed.slice(cut + 1).trim();
  return [rawName.replace(/^-{1,2}/, ""), value];
}

/**
 * Parse and check PV mount options.
 * @throws {CsiError} InvalidArgument naming the first refused, unknown, duplicated or malformed
 *   option
 */
export function parseMountOptions(flags: readonly string[]): MountOptions {
  const out: MountOptions = new Map();
  for (const entry of flags) {
    if (entry.trim() === "") continue;
    if (CONTROL_REGEXP.test(entry)) {
      throw invalidArgument(
        `Mount option ${
          JSON.stringify(entry).slice(0, 100)
        } contains control characters (e.g. a newline): remove them`,
      );
    }
    const [name, value] = splitEntry(entry);
    const refused = REFUSED_OPTIONS[name];
    if (refused !== undefined) {
      throw invalidArgument(`Mount option "${entry.trim()}" is not allowed: ${refused}`);
    }
    const allowed = ALLOWED_OPTIONS[name];
    if (allowed === undefined) {
      throw invalidArgument(
        `Mount option "${entry.trim()}" is not supported; remove it from the PersistentVolume's mountOptions (supported: ${
          Object.keys(ALLOWED_OPTIONS).join(", ")
        })`,
      );
    }
    if (out.has(name)) {
      throw invalidArgument(`Mount option "${name}" is given more than once`);
    }
    if (allowed.value === undefined) {
      if (value !== undefined && value !== "") {
        throw invalidArgument(`Mount option "${name}" takes no value, got "${value}"`);
      }
      out.set(name, true);
      continue;
    }
    if (value === undefined || value === "") {
      throw invalidArgument(`Mount option "${name}" needs a value, e.g. "${name}=..."`);
    }
    const problem = allowed.value(value);
    if (problem !== undefined) {
      throw invalidArgument(`Mount option "${name}=${value}" is invalid: ${problem}`);
    }
    out.set(name, value);
  }
  return out;
}

/** Render options as sorted mount-s3 arguments (`--name` or `--name=value`). */
export function renderArgs(options: MountOptions): string[] {
  return [...options].map(([k, v]) => (v === true ? `--${k}` : `--${k}=${v}`)).sort();
}
