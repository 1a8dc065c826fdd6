/**
 * Declarative flag + environment configuration on top of `node:util` `parseArgs`.
 *
 * Each binary declares its settings once ({@link OptionSpec}); this module derives the `--help`
 * text, parses flags strictly (unknown flags are errors), falls back to environment variables,
 * applies defaults, converts types and runs validators. Every failure is a {@link ConfigError}
 * whose one-line message names the flag, its environment variable and what to do.
 *
 * Precedence: flag > environment variable > default.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { ConfigError } from "./errors.ts";

/** The value types a setting can have. */
export type OptionType = "string" | "boolean" | "integer" | "duration";

/** Declaration of one setting. */
export interface OptionSpec {
  /** Kind of value; `duration` accepts `500ms`, `30s`, `2m`, `1h` and yields milliseconds. */
  readonly type: OptionType;
  /** One-line description for `--help`. */
  readonly description: string;
  /** Environment variable read when the flag is absent. */
  readonly env?: string;
  /** Default (already in the parsed type). */
  readonly default?: string | boolean | number;
  /** Fail when neither flag, env nor default provide a value. */
  readonly required?: boolean;
  /** Allowed values for a string setting. */
  readonly choices?: readonly string[];
  /** Extra check on the parsed value; return an error text (without the flag name) or undefined. */
  readonly validate?: (value: never) => string | undefined;
}

/** A binary's settings: flag name (without dashes) → spec. */
export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

type ValueOf<S extends OptionSpec> = S["type"] extends "boolean" ? boolean
  : S["type"] extends "integer" | "duration" ? number
  : string;

/** Parsed configuration: required or defaulted settings are present, others optional. */
export type ParsedConfig<T extends OptionSpecs> =
  & {
    -readonly [
      K in keyof T as T[K]["required"] extends true ? K : T[K]["default"] extends undefined ? never
      : K
    ]: ValueOf<T[K]>;
  }
  & {
    -readonly [
      K in keyof T as T[K]["required"] extends true ? never : T[K]["default"] extends undefined ? K
      : never
    ]?: ValueOf<T[K]>;
  };

/** Outcome of {@link parseConfig}: either a request for help/version, or the settings. */
export type ConfigResult<T extends OptionSpecs> =
  | { readonly kind: "help" }
  | { readonly kind: "version" }
  | { readonly kind: "run"; readonly config: ParsedConfig<T> };

const DURATION_REGEXP = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parse a duration such as `250ms`, `30s`, `2m` or `1h` into milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = DURATION_REGEXP.exec(text.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2]!]!);
}

function label(name: string, spec: OptionSpec): string {
  return spec.env ? `--${name} (env ${spec.env})` : `--${name}`;
}

function convert(name: string, spec: OptionSpec, raw: string | boolean): string | boolean | number {
  switch (spec.type) {
    case "boolean":
      if (typeof raw === "boolean") return raw;
      if (/^(true|1|yes)$/i.test(raw)) return true;
      if (/^(false|0|no|)$/i.test(raw)) return false;
      throw new ConfigError(`${label(name, spec)} must be true or false, got "${raw}"`);
    case "integer": {
      const n = Number(raw);
      if (typeof raw !== "string" || !/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n)) {
        throw new ConfigError(`${label(name, spec)} must be a whole number, got "${raw}"`);
      }
      return n;
    }
    case "duration": {
      const ms = typeof raw === "string" ? parseDuration(raw) : undefined;
      if (ms === undefined) {
        throw new ConfigError(
          `${label(name, spec)} must be a duration such as 500ms, 30s, 2m or 1h, got "${raw}"`,
        );
      }
      return ms;
    }
    case "string":
      if (typeof raw !== "string") throw new ConfigError(`${label(name, spec)} needs a value`);
      if (spec.choices && !spec.choices.includes(raw)) {
        throw new ConfigError(
          `${label(name, spec)} must be one of ${spec.choices.join(", ")}, got "${raw}"`,
        );
      }
      return raw;
  }
}

/**
 * Parse `args` and `env` against `specs`.
 *
 * `--help`/`-h` and `--version` are always accepted and short-circuit validation.
 *
 * @throws {ConfigError} on an unknown flag, a missing required setting or an invalid value.
 */
export function parseConfig<T extends OptionSpecs>(
  specs: T,
  args: readonly string[],
  env: (name: string) => string | undefined,
): ConfigResult<T> {
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = {
    help: { type: "boolean", short: "h" },
    version: { type: "boolean" },
  };
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = { type: spec.type === "boolean" ? "boolean" : "string" };
  }
  // Booleans also accept the Kubernetes style `--flag=true|false`.
  const explicit: Record<string, string> = {};
  const rest = args.filter((arg) => {
    const m = /^--([^=]+)=(.*)$/.exec(arg);
    if (m && specs[m[1]!]?.type === "boolean") {
      explicit[m[1]!] = m[2]!;
      return false;
    }
    return true;
  });
  let values: Record<string, string | boolean | undefined>;
  try {
    values = {
      ...parseArgs({ args: rest, options, strict: true, allowPositionals: false }).values,
      ...explicit,
    };
  } catch (err) {
    const msg = err instanceof Error
      ? err.message.split("\n")[0]!.replace(/\. To specify.*$/, "")
      : String(err);
    throw new ConfigError(`${msg}; run with --help to list the valid flags`);
  }
  if (values.help) return { kind: "help" };
  if (values.version) return { kind: "version" };

  const config: Record<string, string | boolean | number> = {};
  for (const [name, spec] of Object.entries(specs)) {
    const fromEnv = spec.env !== undefined ? env(spec.env) : undefined;
    // An empty variable means "empty" for a string setting (e.g. METRICS_ADDRESS="" turns the
    // endpoint off) and "unset" for the other types.
    const envValue = fromEnv === "" && spec.type !== "string" ? undefined : fromEnv;
    const raw = values[name] ?? envValue;
    let value: string | boolean | number | undefined;
    if (raw !== undefined) value = convert(name, spec, raw);
    else value = spec.default;
    if (value === undefined || (spec.required && value === "")) {
      if (spec.required) {
        throw new ConfigError(
          `Missing required setting ${label(name, spec)}: set the flag or the environment variable`,
        );
      }
      continue;
    }
    const problem = spec.validate?.(value as never);
    if (problem) throw new ConfigError(`${label(name, spec)} ${problem}`);
    config[name] = value;
  }
  return { kind: "run", config: config as ParsedConfig<T> };
}

/** Render `--help` text for a binary. */
export function helpText(binary: string, summary: string, specs: OptionSpecs): string {
  const rows: [string, string][] = [
    ["-h, --help", "Show this help and exit"],
    ["--version", "Print the version and exit"],
  ];
  for (const [name, spec] of Object.entries(specs)) {
    const value = spec.type === "boolean"
      ? ""
      : spec.choices
      ? `=<${spec.choices.join("|")}>`
      : `=<${spec.type}>`;
    const extras: string[] = [];
    if (spec.env) extras.push(`env ${spec.env}`);
    if (spec.default !== undefined && spec.default !== "") {
      extras.push(`default ${formatDefault(spec)}`);
    }
    if (spec.required) extras.push("required");
    rows.push([
      `--${name}${value}`,
      `${spec.description}${extras.length ? ` [${extras.join(", ")}]` : ""}`,
    ]);
  }
  const width = Math.min(40, Math.max(...rows.map(([f]) => f.length)) + 2);
  const lines = rows.map(([f, d]) =>
    `  ${f.padEnd(width)}${f.length >= width ? "\n  " + " ".repeat(width) : ""}${d}`
  );
  return `${binary}: ${summary}\n\nUsage: ${binary} [flags]\n\nFlags:\n${lines.join("\n")}\n`;
}

function formatDefault(spec: OptionSpec): string {
  if (spec.type === "duration" && typeof spec.default === "number") return `${spec.default}ms`;
  return String(spec.default);
}
