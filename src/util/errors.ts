/**
 * Error types shared by every binary. Boundary folders throw these (or subclasses) so callers can
 * branch with `instanceof` instead of matching message text.
 *
 * @module
 */

/** Bad configuration (flags or environment): the binary exits with {@link EXIT_CONFIG}. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** A bounded wait ran out of time. `what` names the thing that was awaited. */
export class TimeoutError extends Error {
  override name = "TimeoutError";
  /** Create a timeout error for `what`, waited for `ms` milliseconds. */
  constructor(readonly what: string, readonly ms: number, options?: ErrorOptions) {
    super(`Timed out after ${ms} ms waiting for ${what}`, options);
  }
}

/** Process exit code used when the configuration is invalid. */
export const EXIT_CONFIG = 2;

/** Render any thrown value as a single line (no stack), for logs and CLI errors. */
export function errorMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s*\n\s*/g, " ");
}
