/**
 * What each FUSE engine can honour, checked on both sides of the mount message: by the node plugin
 * in NodePublishVolume (before anything is mounted, so the user gets InvalidArgument naming the
 * engine) and by the mounter when it builds the engine's command line (a message from another
 * node plugin is held to the same rules).
 *
 * `mount-s3` honours every option of the node's allow-list. `rclone mount2` is the fallback and
 * never silently weaker: it cannot refuse deletes or overwrites of whole files, so a writable
 * volume on rclone must allow both (`allow-delete` and `allow-overwrite`), and an option it
 * cannot translate is refused instead of dropped.
 *
 * Pure: unit-tested without permissions.
 *
 * @module
 */
import type { Engine } from "./mount_message.ts";

/** Parsed options: name without dashes → value, or `true` for a flag. */
export type EngineOptions = ReadonlyMap<string, string | true>;

/** Options `rclone mount2` translates (see the mounter's command builder). */
export const RCLONE_OPTIONS: ReadonlySet<string> = new Set([
  "read-only",
  "allow-other",
  "allow-root",
  "allow-delete",
  "allow-overwrite",
  "uid",
  "gid",
  "dir-mode",
  "file-mode",
  "prefix",
  "region",
  "force-path-style",
  "metadata-ttl",
  "cache",
  "max-cache-size",
  "storage-class",
  "sse",
  "sse-kms-key-id",
  "debug",
  "debug-crt",
  "no-log",
  "max-threads",
  "part-size",
  "write-part-size",
  "read-part-size",
  "upload-checksums",
  "user-agent-prefix",
]);

/** Parse `--name` / `--name=value` arguments into {@link EngineOptions}. */
export function parseEngineArgs(args: readonly string[]): Map<string, string | true> {
  const out = new Map<string, string | true>();
  for (const a of args) {
    const body = a.replace(/^--/, "");
    const eq = body.indexOf("=");
    out.set(eq < 0 ? body : body.slice(0, eq), eq < 0 ? true : body.slice(eq + 1));
  }
  return out;
}

/**
 * Why `engine` cannot serve a volume with `options`, or undefined. The text names the engine, the
 * option and the ways out.
 */
export function engineOptionsProblem(engine: Engine, options: EngineOptions): string | undefined {
  if (engine !== "rclone") return undefined;
  for (const [name, value] of options) {
    if (!RCLONE_OPTIONS.has(name)) {
      return `The rclone engine cannot honour the mount option "${name}${
        value === true ? "" : `=${value}`
      }": remove it from the volume's mountOptions or use the mount-s3 engine`;
    }
  }
  const checksums = options.get("upload-checksums");
  if (checksums !== undefined && checksums !== "off") {
    return `The rclone engine cannot honour "upload-checksums=${checksums}" (only "off"): use the mount-s3 engine or upload-checksums=off`;
  }
  if (!options.has("read-only")) {
    const missing = ["allow-delete", "allow-overwrite"].filter((o) => !options.has(o));
    if (missing.length) {
      return `The rclone engine cannot refuse ${
        missing.map((o) => (o === "allow-delete" ? "deletes" : "overwrites")).join(" or ")
      } (mount-s3 does without ${missing.join(" and ")}): add ${
        missing.join(" and ")
      } to the volume's mountOptions, mount it read-only, or use the mount-s3 engine`;
    }
  }
  return undefined;
}

/** Bytes as an rclone size: a size without suffix is read as KiB by rclone, so always suffixed. */
export function rcloneSize(bytes: number): string {
  if (bytes > 0 && bytes % 2 ** 30 === 0) return `${bytes / 2 ** 30}G`;
  if (bytes > 0 && bytes % 2 ** 20 === 0) return `${bytes / 2 ** 20}M`;
  if (bytes > 0 && bytes % 2 ** 10 === 0) return `${bytes / 2 ** 10}K`;
  return `${bytes}B`;
}
