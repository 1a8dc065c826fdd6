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
import { MOUNT_OPTION_SPECS, MOUNT_OPTIONS_BY_NAME } from "./mount_option_spec.ts";
import { RCLONE_MESSAGES } from "./volume_messages.ts";
import { fill } from "../util/message_template.ts";

/** Parsed options: name without dashes → value, or `true` for a flag. */
export type EngineOptions = ReadonlyMap<string, string | true>;

/** Options `rclone mount2` translates (see the mounter's command builder), from the option list. */
export const RCLONE_OPTIONS: ReadonlySet<string> = new Set(
  MOUNT_OPTION_SPECS.filter((s) => s.rclone === true).map((s) => s.name),
);

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
      const why = MOUNT_OPTIONS_BY_NAME.get(name)?.rclone;
      return fill(RCLONE_MESSAGES.option, {
        option: value === true ? name : `${name}=${value}`,
        why: typeof why === "string" ? ` (${why})` : "",
      });
    }
    const only = MOUNT_OPTIONS_BY_NAME.get(name)?.rcloneValues;
    if (only && value !== true && !only.includes(value)) {
      return fill(RCLONE_MESSAGES.value, {
        name,
        value,
        only: only.map((v) => `"${v}"`).join(", "),
        first: only[0]!,
      });
    }
  }
  if (!options.has("read-only")) {
    const missing = ["allow-delete", "allow-overwrite"].filter((o) => !options.has(o));
    if (missing.length) {
      return fill(RCLONE_MESSAGES.writable, {
        what: missing.map((o) => (o === "allow-delete" ? "deletes" : "overwrites")).join(" or "),
        missing: missing.join(" and "),
      });
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
