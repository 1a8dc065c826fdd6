/**
 * Timestamp formats of the Kubernetes API.
 *
 * @module
 */

/** RFC 3339 time in whole seconds, as metav1.Time is serialised. */
export function nowSeconds(ms = Date.now()): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
}
