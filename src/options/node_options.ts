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
import { DEFAULT_ENGINE, ENGINES } from "../mppod/mount_message.ts";
import { MOUNTPOINT_POD_OPTIONS } from "./mountpoint_pod_options.ts";
import { EndpointUrlError, parseS3Endpoint } from "../s3/endpoint_url.ts";

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
  ...MOUNTPOINT_POD_OPTIONS,
  "metrics-port": {
    type: "integer",
    env: "METRICS_PORT",
    default: 0,
    description: "TCP port of the Prometheus /metrics endpoint; 0 disables it",
  },
  "s3-endpoint-url": {
    type: "string",
    env: "AWS_ENDPOINT_URL",
    description:
      "S3 endpoint of the volumes whose node-publish Secret names none (key endpoint), e.g. https://s3.example.com; AWS when unset",
  },
  "s3-region": {
    type: "string",
    env: "AWS_REGION",
    default: "us-east-1",
    description: "Default S3 region (a volume's region option overrides it)",
  },
  "s3-ca-bundle": {
    type: "string",
    env: "AWS_CA_BUNDLE",
    default: "",
    description:
      "PEM file of extra CA certificates trusted for the S3 endpoint by the bucket check (the engines get the Mountpoint Pod's own CA)",
  },
  "pod-identity-audience": {
    type: "string",
    env: "POD_IDENTITY_AUDIENCE",
    default: "sts.amazonaws.com",
    description:
      "authenticationSource pod: audience of the CSIDriver's tokenRequests whose ServiceAccount token is exchanged with STS (the OIDC provider's client id)",
  },
  "sts-endpoint-url": {
    type: "string",
    env: "AWS_ENDPOINT_URL_STS",
    default: "",
    description:
      "authenticationSource pod: STS endpoint (e.g. https://s3.example.com for Ceph RGW); empty: the volume's S3 endpoint, else AWS STS of the region",
    validate: (v: string) => {
      if (v === "") return undefined;
      try {
        parseS3Endpoint(v);
        return undefined;
      } catch (err) {
        return err instanceof EndpointUrlError ? err.message : String(err);
      }
    },
  },
  "pod-identity-session": {
    type: "duration",
    default: 3_600_000,
    description:
      "authenticationSource pod: lifetime asked for the temporary credentials (STS allows 15 min to 12 h; mount-s3 rereads them at least every 15 min)",
    validate: (ms: number) =>
      ms < 900_000 || ms > 43_200_000 ? "must be between 15m and 12h" : undefined,
  },
  "pod-identity-renew-before": {
    type: "duration",
    default: 1_800_000,
    description:
      "authenticationSource pod: a republish renews the credentials once less than this is left (more than 15 min, so that mount-s3 sees the new ones in time)",
  },
  "default-engine": {
    type: "string",
    env: "DEFAULT_ENGINE",
    default: DEFAULT_ENGINE,
    choices: ENGINES,
    description:
      "FUSE engine of volumes that name none (volume attribute engine): mount-s3, or rclone (which refuses writable volumes without allow-delete and allow-overwrite)",
  },
  "attachment-timeout": {
    type: "duration",
    default: 90_000,
    description:
      "How long NodePublishVolume waits for the Mountpoint Pod assignment and for that pod to run",
  },
  "mount-timeout": {
    type: "duration",
    default: 30_000,
    description: "How long NodePublishVolume waits for a new FUSE mount to answer",
  },
  "read-ahead-kb": {
    type: "integer",
    default: 256,
    description:
      "Read-ahead of new FUSE mounts in KiB (0 keeps the kernel default of 128); rclone mount2 becomes erratic from 512",
  },
  "bucket-check": {
    type: "boolean",
    default: true,
    description: "Check with HeadBucket that the bucket is reachable before a new mount",
  },
  "shutdown-grace": {
    type: "duration",
    default: 10_000,
    description: "How long in-flight CSI calls may run after SIGTERM",
  },
} as const satisfies OptionSpecs;
