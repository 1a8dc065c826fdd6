/**
 * Timestamp formats of the Kubernetes API: `metav1.Time` (RFC 3339, whole seconds, UTC) for
 * object timestamps and `metav1.MicroTime` (exactly six fractional digits) for Leases and
 * events.k8s.io Events, which the API server refuses in any other precision.
 *
 * @module
 */

/** `metav1.Time`: RFC 3339 in whole seconds, UTC (`2026-11-26T03:32:19Z`). */
export function kubeTime(at: Date | number = Date.now()): string {
  return new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** `metav1.MicroTime`: RFC 3339 with six fractional digits (`2026-11-26T03:32:19.123000Z`). */
export function microTime(at: Date | number = Date.now()): string {
  return new Date(at).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
