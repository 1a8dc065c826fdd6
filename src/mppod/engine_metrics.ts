/**
 * Per-volume metrics of the FUSE engine, a contract across three processes: the controller puts
 * the port and the volume's labels on the Mountpoint Pod (env `MOUNTER_METRICS_PORT`,
 * `MOUNTER_METRICS_LABELS`, a container port named `metrics`), the mounter passes them to
 * `mount-s3` (env `MOUNT_S3_METRICS_PORT`, `MOUNT_S3_METRICS_LABELS`), and the engine serves
 * Prometheus text on that port (src/engine/src/metrics.rs). Prometheus scrapes the Mountpoint Pod
 * directly; the node plugin never reads the pod's figures.
 *
 * @module
 */

/** Name of the Mountpoint container's metrics port (for Services and PodMonitors). */
export const METRICS_PORT_NAME = "metrics";
/** Engine variable: the port of its Prometheus endpoint (0 or unset: off). */
export const ENGINE_METRICS_PORT_ENV = "MOUNT_S3_METRICS_PORT";
/** Engine variable: the constant labels of every sample, a JSON object. */
export const ENGINE_METRICS_LABELS_ENV = "MOUNT_S3_METRICS_LABELS";

/**
 * The labels the controller gives a Mountpoint Pod's figures, Prometheus label name → value:
 * `volume` (the PersistentVolume's name), `volume_id` (its volume handle) and `mountpoint_pod`
 * (the pod's name: Prometheus adds `pod` itself, OTLP has no such label).
 */
export function engineMetricsLabels(
  pod: string,
  persistentVolume: string,
  volumeId: string,
): Record<string, string> {
  return { "volume": persistentVolume, "volume_id": volumeId, "mountpoint_pod": pod };
}

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// deno-lint-ignore no-control-regex
const CONTROL = /[\x00-\x1f\x7f-\x9f]/;

/** Why `json` is not a labels object the engine accepts, or undefined. */
export function metricsLabelsProblem(json: string): string | undefined {
  let o: unknown;
  try {
    o = JSON.parse(json);
  } catch {
    return `must be a JSON object of string labels such as {"volume":"pv-1"}, got ${
      JSON.stringify(json.slice(0, 100))
    }`;
  }
  if (!o || typeof o !== "object" || Array.isArray(o)) {
    return `must be a JSON object of string labels such as {"volume":"pv-1"}`;
  }
  const entries = Object.entries(o);
  if (entries.length > 16) return `has ${entries.length} labels; at most 16 are allowed`;
  for (const [k, v] of entries) {
    if (!LABEL_NAME.test(k) || k.startsWith("__") || k === "le") {
      return `label name "${k}" must match [a-zA-Z_][a-zA-Z0-9_]*, not start with "__" and not be "le"`;
    }
    if (typeof v !== "string" || new TextEncoder().encode(v).length > 1024 || CONTROL.test(v)) {
      return `label "${k}" must be a string of at most 1024 bytes without control characters`;
    }
  }
  return undefined;
}
