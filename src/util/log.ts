/**
 * Structured logging on `@logtape/logtape`: one JSON object per line (production) or a human text
 * format (development), level chosen by `--log-level` / `LOG_LEVEL`.
 *
 * Every record goes through {@link redact} before it is formatted, so values under keys that name
 * credentials (CSI `secrets`, `AWS_SECRET_ACCESS_KEY`, tokens, passwords) never reach a sink even
 * when a caller logs a whole request object by mistake.
 *
 * @module
 */
import {
  configureSync,
  getJsonLinesFormatter,
  getLogger,
  getTextFormatter,
  type Logger,
  type LogLevel,
  type LogRecord,
  resetSync,
  type Sink,
} from "@logtape/logtape";
import type { OptionSpecs } from "./config.ts";
import { REDACTED, redactUrlCredentials } from "./redact.ts";

/** Root category of every logger in this project. */
export const LOG_ROOT = "s3csi";

/** Log formats accepted by `--log-format`. */
export const LOG_FORMATS = ["json", "text"] as const;
/** Log levels accepted by `--log-level`. */
export const LOG_LEVELS = ["trace", "debug", "info", "warning", "error", "fatal"] as const;

/** Flags shared by the three binaries. */
export const LOG_OPTIONS = {
  "log-level": {
    type: "string",
    env: "LOG_LEVEL",
    default: "info",
    choices: LOG_LEVELS,
    description: "Lowest level that is logged",
  },
  "log-format": {
    type: "string",
    env: "LOG_FORMAT",
    default: "json",
    choices: LOG_FORMATS,
    description: "json: one JSON object per line; text: human readable",
  },
} as const satisfies OptionSpecs;

export { REDACTED, redactUrlCredentials };

const SECRET_KEY_REGEXP =
  /^(secrets?|password|passwd|token|bearer|authorization|session_?token|secret_?access_?key|aws_secret_access_key|aws_session_token|access_?key_?secret|credentials?|csi\.storage\.k8s\.io\/serviceAccount\.tokens|serviceAccountTokens)$/i;

/** True when a property or map key names a credential whose value must never be logged. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY_REGEXP.test(key);
}

/**
 * Deep copy of `value` with every value under a secret-looking key replaced by {@link REDACTED}.
 * Environment-style strings (`AWS_SECRET_ACCESS_KEY=...`) inside arrays are masked too, and so are
 * the user and password of URLs in any string ({@link redactUrlCredentials}).
 */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 12) return "[…]";
  if (typeof value === "string") {
    const eq = value.indexOf("=");
    if (eq > 0 && isSecretKey(value.slice(0, eq))) return `${value.slice(0, eq)}=${REDACTED}`;
    return redactUrlCredentials(value);
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) {
    return { name: value.name, message: redactUrlCredentials(value.message) };
  }
  if (value !== null && typeof value === "object") {
    if (value instanceof Uint8Array) return `<${value.byteLength} bytes>`;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (isSecretKey(k)) {
        out[k] = v !== null && typeof v === "object" && !Array.isArray(v)
          ? Object.fromEntries(Object.keys(v).map((key) => [key, REDACTED]))
          : REDACTED;
      } else out[k] = redact(v, depth + 1);
    }
    return out;
  }
  return value;
}

/** Options for {@link configureLogging}. */
export interface LoggingOptions {
  /** @default "info" */
  readonly level?: string;
  /** @default "json" */
  readonly format?: string;
  /** Where formatted lines go. @default synchronous write to stderr */
  readonly write?: (line: string) => void;
}

const encoder = new TextEncoder();

function stderrWrite(line: string): void {
  Deno.stderr.writeSync(encoder.encode(line));
}

/**
 * Configure the process-wide logger. Call once from a `cmd/` entrypoint (or a test).
 * Logs are written synchronously so nothing is lost when the process exits right after.
 */
export function configureLogging(options: LoggingOptions = {}): void {
  const format = options.format ?? "json";
  const formatter = format === "text"
    ? getTextFormatter({ timestamp: "date-time-tz", category: "." })
    : getJsonLinesFormatter({ properties: "flatten", categorySeparator: "." });
  const write = options.write ?? stderrWrite;
  const sink: Sink = (record: LogRecord) => {
    const safe: LogRecord = {
      ...record,
      properties: redact(record.properties) as Record<string, unknown>,
      message: record.message.map((part, i) => (i % 2 === 1 ? redact(part) : part)),
    };
    write(formatter(safe));
  };
  resetSync();
  configureSync({
    reset: true,
    sinks: { main: sink },
    loggers: [
      { category: [LOG_ROOT], lowestLevel: (options.level ?? "info") as LogLevel, sinks: ["main"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["main"] },
    ],
  });
}

/** A logger under the project root category, e.g. `logger("node", "publish")`. */
export function logger(...category: string[]): Logger {
  return getLogger([LOG_ROOT, ...category]);
}
