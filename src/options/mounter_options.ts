/**
 * Settings of the mounter (`s3-csi-mounter`), the entrypoint of Mountpoint Pods.
 *
 * @module
 */
import type { OptionSpecs } from "../util/config.ts";
import { COMM_DIR, WORK_DIR } from "../mppod/paths.ts";

/** Engine choices: `auto` picks mount-s3 when it is on PATH, else rclone. */
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
  engine: {
    type: "string",
    env: "MOUNTER_ENGINE",
    default: "auto",
    choices: ENGINE_CHOICES,
    description: "FUSE engine to run (a volume may override it)",
  },
} as const satisfies OptionSpecs;
