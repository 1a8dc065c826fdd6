/**
 * Secrets inside text: the placeholder written instead of them, and the user and password of URLs
 * (`http://user:pass@proxy:3128`), which may reach the engine (it needs them) but never a log
 * line, a gRPC error or an Event. Pure, no imports: `csi/errors.ts` uses it too.
 *
 * @module
 */

/** Placeholder written instead of a secret value. */
export const REDACTED = "[REDACTED]";

/** `scheme://userinfo@`: the user and password of a URL (a proxy's, an endpoint's). */
const URL_USERINFO_REGEXP = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]+@/gi;

/** `text` with the user and password of every URL in it replaced by {@link REDACTED}. */
export function redactUrlCredentials(text: string): string {
  return text.includes("@") ? text.replace(URL_USERINFO_REGEXP, `$1${REDACTED}@`) : text;
}
