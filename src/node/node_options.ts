/**
 * Settings of the node plugin (`s3-csi-node`). Names and environment variables follow the
 * upstream chart so existing manifests keep working.
 *
 * @module
 */
import { endpointProblem } from "../csi/endpoint.ts";
import type { OptionSpecs } from "../util/config.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../mppod/labels.ts";
import { DEFAULT_KUBELET_ROOT } from "../mppod/paths.ts";

function absolutePath(value: string): string | undefined {
  return value.startsWith("/") ? undefined : `must be an absolute path, got "${value}"`;
}

/** Node plugin settings. */
export const NODE_OPTIONS = {
  endpoint: {
    type: "string",
    env: "CSI_ENDPOINT",
    default: "unix:///csi/csi.sock",
    description: "CSI endpoint the kubelet calls (unix:// only)",
    validate: endpointProblem,
  },
  "node-id": {
    type: "string",
    env: "CSI_NODE_NAME",
    required: true,
    description: "This node's name, returned by NodeGetInfo and used to find attachments",
  },
  "kubelet-path": {
    type: "string",
    env: "KUBELET_PATH",
    default: DEFAULT_KUBELET_ROOT,
    description: "Kubelet root directory (same path on host and in the container)",
    validate: absolutePath,
  },
  "mountpoint-namespace": {
    type: "string",
    env: "MOUNTPOINT_NAMESPACE",
    default: DEFAULT_MOUNTPOINT_NAMESPACE,
    description: "Namespace of the Mountpoint Pods",
  },
  "shutdown-grace": {
    type: "duration",
    default: 10_000,
    description: "How long in-flight CSI calls may run after SIGTERM",
  },
} as const satisfies OptionSpecs;
