/**
 * Mount options of a volume: the PV's `spec.mountOptions` (CSI `mount_flags`) in mount-s3 syntax,
 * parsed and checked against the allow-list of `src/mppod/mount_option_spec.ts` (upstream
 * Mountpoint's whole command line, each option decided there). Anything not allowed is
 * **rejected** with InvalidArgument naming the option and why — never silently dropped (upstream
 * strips several options with only a log line; a user then wonders why their option had no
 * effect). The one exception is upstream's own: `foreground`/`-f` is accepted and dropped (the
 * engine always runs in the foreground), so PVs written for the upstream drivers keep working.
 *
 * Syntax (as upstream): each entry is `name`, `name=value` or `name value`, optionally with leading
 * dashes, or upstream's one-letter form (`-d`); the name is split at the first `=` or space. Blank
 * entries are skipped.
 *
 * The admission policy (`src/deploy/render_volume_policy.ts`) evaluates the same rules in CEL and
 * must give the same first problem with the same message: {@link mountOptionsProblem} is the
 * reference its real-apiserver test compares with.
 *
 * @module
 */
import { invalidArgument } from "../csi/errors.ts";
import {
  INTERNAL_OPTIONS,
  INTERNAL_REASON,
  MAX_MOUNT_OPTIONS,
  MOUNT_OPTIONS_BY_NAME,
  REFUSED_FORMS,
  SHORT_OPTION_NAMES,
  VOLUME_OPTION_NAMES,
} from "../mppod/mount_option_spec.ts";
import { OPTION_MESSAGES as M } from "../mppod/volume_messages.ts";
import { fill } from "../util/message_template.ts";
import { celTrim, firstChars, valueProblem } from "../util/value_rules.ts";

// deno-lint-ignore no-control-regex
const CONTROL_REGEXP = /[\x00-\x1f\x7f]/;
// deno-lint-ignore no-control-regex
const CONTROL_REGEXP_ALL = /[\x00-\x1f\x7f]/g;

/** Parsed options: name (without dashes) → value, or `true` for a flag. */
export type MountOptions = Map<string, string | true>;

/** An entry split as upstream splits it. */
export interface SplitEntry {
  /** The entry without surrounding spaces. */
  readonly trimmed: string;
  /** The name without leading dashes, short forms replaced by their long name. */
  readonly name: string;
  /** The value without surrounding spaces; "" when none. */
  readonly value: string;
}

/** Split one entry into name and value. */
export function splitEntry(entry: string): SplitEntry {
  const trimmed = celTrim(entry);
  const raw = /^[^= ]*/.exec(trimmed)![0];
  const bare = raw.startsWith("--") ? raw.slice(2) : raw.startsWith("-") ? raw.slice(1) : raw;
  const value = trimmed.length > raw.length ? celTrim(trimmed.slice(raw.length + 1)) : "";
  return { trimmed, name: SHORT_OPTION_NAMES.get(bare) ?? bare, value };
}

/** The entry as messages show it when it holds control characters: without them. */
export function shownWithoutControls(entry: string): string {
  return firstChars(celTrim(entry.replace(CONTROL_REGEXP_ALL, "")), 100);
}

/**
 * The problem of one non-blank entry; `duplicate` tells whether an earlier entry has its name.
 * The admission policy follows these steps in this order.
 */
export function entryProblem(
  entry: string,
  duplicate: (name: string) => boolean,
): string | undefined {
  if (CONTROL_REGEXP.test(entry)) return fill(M.control, { shown: shownWithoutControls(entry) });
  const { trimmed, name, value } = splitEntry(entry);
  const form = REFUSED_FORMS[name];
  if (form !== undefined) return fill(M.notAllowed, { entry: trimmed, reason: form });
  if (INTERNAL_OPTIONS.includes(name)) {
    return fill(M.notAllowed, { entry: trimmed, reason: INTERNAL_REASON });
  }
  const spec = MOUNT_OPTIONS_BY_NAME.get(name);
  if (spec === undefined) {
    return fill(M.unsupported, { entry: trimmed, supported: VOLUME_OPTION_NAMES.join(", ") });
  }
  if (spec.status === "refused" || spec.status === "driver") {
    return fill(M.notAllowed, { entry: trimmed, reason: spec.reason! });
  }
  if (duplicate(name)) return fill(M.duplicate, { name });
  if (spec.value === undefined) {
    return value === "" ? undefined : fill(M.takesNoValue, { name, value });
  }
  if (value === "") return fill(M.needsValue, { name });
  const problem = valueProblem(spec.value.rules, value);
  return problem === undefined ? undefined : fill(M.invalid, { name, value, problem });
}

/** The first problem of a volume's mount options, or undefined when every entry is allowed. */
export function mountOptionsProblem(flags: readonly string[]): string | undefined {
  if (flags.length > MAX_MOUNT_OPTIONS) {
    return fill(M.tooMany, { max: MAX_MOUNT_OPTIONS, count: flags.length });
  }
  const seen = new Set<string>();
  for (const entry of flags) {
    if (celTrim(entry) === "") continue;
    const problem = entryProblem(entry, (name) => seen.has(name));
    if (problem !== undefined) return problem;
    seen.add(splitEntry(entry).name);
  }
  return undefined;
}

/**
 * Parse and check PV mount options; `foreground` is accepted and left out.
 * @throws {CsiError} InvalidArgument naming the first refused, unknown, duplicated or malformed
 *   option
 */
export function parseMountOptions(flags: readonly string[]): MountOptions {
  const problem = mountOptionsProblem(flags);
  if (problem !== undefined) throw invalidArgument(problem);
  const out: MountOptions = new Map();
  for (const entry of flags) {
    if (celTrim(entry) === "") continue;
    const { name, value } = splitEntry(entry);
    if (MOUNT_OPTIONS_BY_NAME.get(name)?.status === "ignored") continue;
    out.set(name, MOUNT_OPTIONS_BY_NAME.get(name)?.value === undefined ? true : value);
  }
  return out;
}

/** Render options as sorted mount-s3 arguments (`--name` or `--name=value`). */
export function renderArgs(options: MountOptions): string[] {
  return [...options].map(([k, v]) => (v === true ? `--${k}` : `--${k}=${v}`)).sort();
}
