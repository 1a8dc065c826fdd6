/**
 * Settings of the mounter (`s3-csi-mounter`), the entrypoint of Mountpoint Pods.
 *
 * @module
 */
import type { OptionSpecs } from "../util/config.ts";
import { COMM_DIR, WORK_DIR } from "../mppod/paths.ts";
import { metricsLabelsProblem } from "../mppod/engine_metrics.ts";

/**
 * Engine choices for messages that name no engine (the node plugin always names one): `auto`
 * picks mount-s3 when it is on PATH, else rclone (which refuses options it cannot honour).
 */
export const ENGINE_CHOICES = ["auto", "mount-s3", "rclone"] as const;

/** Mounter settings. */
export const MOUNTER_OPTIONS = {
  "comm-dir": {
    type: "string",
    env: "MOUNTER_COMM_DIR",
    default: COMM_DIR,
    description: "Directory shared with the node plugin (mount.sock, mount.exit, mount.error)",
    validate: (
      v: string,
    ) => (v.startsWith("/") ? undefined : `must be an absolute path, got "${v}"`),
  },
  "work-dir": {
    type: "string",
    env: "MOUNTER_WORK_DIR",
    default: WORK_DIR,
    description:
      "Private working directory (engine HOME): a fresh run-<id> dir per start; only run dirs an earlier mounter marked are removed. Never inside the comm dir",
    validate: (
      v: string,
    ) => (v.startsWith("/") ? undefined : `must be an absolute path, got "${v}"`),
  },
  "cache-dir": {
    type: "string",
    env: "MOUNTER_CACHE_DIR",
    default: "",
    description:
      "The Mountpoint Pod's cache volume: a volume asking for a local cache gets the engine's cache here (none: such a volume is refused). Never inside the comm dir",
    validate: (
      v: string,
    ) => (v === "" || v.startsWith("/") ? undefined : `must be an absolute path, got "${v}"`),
  },
  "ca-bundle": {
    type: "string",
    env: "MOUNTER_CA_BUNDLE",
    default: "",
    description:
      "PEM file of the CAs the engine trusts for S3 (the Mountpoint Pod's custom CA); the system's when empty",
    validate: (
      v: string,
    ) => (v === "" || v.startsWith("/") ? undefined : `must be an absolute path, got "${v}"`),
  },
  "receive-timeout": {
    type: "duration",
    env: "MOUNTER_RECEIVE_TIMEOUT",
    default: 120_000,
    description: "How long to wait for the node plugin's mount message",
  },
  "drain-grace": {
    type: "duration",
    env: "MOUNTER_DRAIN_GRACE",
    default: 0,
    description:
      "On SIGTERM, keep serving the mount this long (or until the node plugin asks for the exit) so workloads outlive a drain",
  },
  "metrics-port": {
    type: "integer",
    env: "MOUNTER_METRICS_PORT",
    default: 0,
    description:
      "Port where mount-s3 serves this volume's Prometheus metrics (/metrics); 0 disables it (set by the controller)",
    validate: (v: number) =>
      v >= 0 && v <= 65535 ? undefined : `must be a TCP port from 1 to 65535, or 0, got ${v}`,
  },
  "metrics-labels": {
    type: "string",
    env: "MOUNTER_METRICS_LABELS",
    default: "",
    description:
      "Labels of every metric, a JSON object (the controller sets volume, volume_id and mountpoint_pod)",
    validate: (v: string) => (v === "" ? undefined : metricsLabelsProblem(v)),
  },
  engine: {
    type: "string",
    env: "MOUNTER_ENGINE",
    default: "mount-s3",
    choices: ENGINE_CHOICES,
    description:
      "FUSE engine for a mount message that names none (the node plugin names the volume's engine)",
  },
} as const satisfies OptionSpecs;
