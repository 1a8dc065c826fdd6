/**
 * Settings of the controller (`s3-csi-controller`). Environment variable names follow the design
 * documents (`MOUNTPOINT_*`) so the upstream manifests' configuration keeps working.
 *
 * @module
 */
import { endpointProblem } from "../csi/endpoint.ts";
import type { OptionSpecs } from "../util/config.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../mppod/labels.ts";

/** Controller settings. */
export const CONTROLLER_OPTIONS = {
  "csi-endpoint": {
    type: "string",
    env: "CSI_ENDPOINT",
    description:
      "Serve the CSI Identity/Controller services on this unix:// socket (for csi-provisioner)",
    validate: endpointProblem,
  },
  "mountpoint-namespace": {
    type: "string",
    env: "MOUNTPOINT_NAMESPACE",
    default: DEFAULT_MOUNTPOINT_NAMESPACE,
    description: "Namespace of the Mountpoint Pods",
  },
  "mountpoint-version": {
    type: "string",
    env: "MOUNTPOINT_VERSION",
    default: "",
    description: "Version of the FUSE engine in the Mountpoint image (label on Mountpoint Pods)",
  },
  "mountpoint-image": {
    type: "string",
    env: "MOUNTPOINT_IMAGE",
    default: "",
    description: "Container image of the Mountpoint Pods",
  },
  "shutdown-grace": {
    type: "duration",
    default: 10_000,
    description: "How long in-flight work may run after SIGTERM",
  },
} as const satisfies OptionSpecs;
