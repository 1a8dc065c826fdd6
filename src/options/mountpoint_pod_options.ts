/**
 * Settings of Mountpoint Pods that both the controller and the node plugin need: the controller
 * renders the pods with them, the node plugin checks a pod against them before it hands it
 * credentials and a FUSE connection (`node/pod_invariants.ts`), and sizes the engine's cache for
 * the same limit. The deployment gives both binaries the same values.
 *
 * @module
 */
import type { OptionSpecs } from "../util/config.ts";
import { nonNegativeQuantity } from "../kube/quantity.ts";
import { DEFAULT_CACHE_SIZE_LIMIT } from "../mppod/cache_volume.ts";
import {
  DEFAULT_MOUNTPOINT_COMMAND,
  DEFAULT_MOUNTPOINT_IMAGE,
  DEFAULT_MOUNTPOINT_UID,
} from "../mppod/pod_spec.ts";

const IMAGE_REGEXP = /^[a-zA-Z0-9][a-zA-Z0-9._\-/:@]*$/;

/** An image reference, or "". */
export function imageOrEmpty(v: string): string | undefined {
  return v === "" || IMAGE_REGEXP.test(v) ? undefined : `must be an image reference, got "${v}"`;
}

/** A number above zero. */
export function positive(v: number): string | undefined {
  return v > 0 ? undefined : `must be greater than zero, got ${v}`;
}

/** A Kubernetes quantity of at least one byte. */
export function positiveSize(v: string): string | undefined {
  const n = nonNegativeQuantity(v);
  return n !== undefined && n >= 1
    ? undefined
    : `must be a positive Kubernetes quantity such as 256Mi or 10Gi, got "${v}"`;
}

/** The shared Mountpoint Pod settings. */
export const MOUNTPOINT_POD_OPTIONS = {
  "mountpoint-image": {
    type: "string",
    env: "MOUNTPOINT_IMAGE",
    default: DEFAULT_MOUNTPOINT_IMAGE,
    description:
      "Container image of the Mountpoint Pods (the node plugin refuses a pod with another one)",
    validate: imageOrEmpty,
  },
  "mountpoint-command": {
    type: "string",
    env: "MOUNTPOINT_COMMAND",
    default: DEFAULT_MOUNTPOINT_COMMAND,
    description: "Entrypoint of the Mountpoint container (the node plugin refuses another one)",
  },
  "mountpoint-uid": {
    type: "integer",
    env: "MOUNTPOINT_UID",
    default: DEFAULT_MOUNTPOINT_UID,
    description:
      "Non-root user and group (and fsGroup) of the Mountpoint container (the node plugin refuses another one)",
    validate: positive,
  },
  "mountpoint-cache-size-limit": {
    type: "string",
    env: "MOUNTPOINT_CACHE_SIZE_LIMIT",
    default: DEFAULT_CACHE_SIZE_LIMIT,
    description:
      "Size limit of a disk emptyDir cache whose PV sets none (the deprecated cache mount option, or cache: emptyDir without cacheEmptyDirSizeLimit); the engine's cache stays within it",
    validate: positiveSize,
  },
} as const satisfies OptionSpecs;
