/**
 * Settings of the controller (`s3-csi-controller`). Environment variable names follow the design
 * documents (`MOUNTPOINT_*`) so the upstream manifests' configuration keeps working.
 *
 * @module
 */
import { endpointProblem } from "../csi/endpoint.ts";
import type { OptionSpecs, ParsedConfig } from "../util/config.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../mppod/labels.ts";
import { PROVISIONING_OPTIONS } from "./provisioning_options.ts";
import {
  imageOrEmpty,
  MOUNTPOINT_POD_OPTIONS,
  positive,
  positiveSize,
} from "./mountpoint_pod_options.ts";
import { DEFAULT_WORK_SIZE_LIMIT } from "../mppod/pod_spec.ts";
import { nonNegativeQuantity } from "../kube/quantity.ts";

const DNS_LABEL_REGEXP = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN_REGEXP = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

function dnsLabel(v: string): string | undefined {
  return DNS_LABEL_REGEXP.test(v)
    ? undefined
    : `must be a DNS label (lowercase letters, digits, '-'), got "${v}"`;
}

function dnsSubdomainOrEmpty(v: string): string | undefined {
  return v === "" || DNS_SUBDOMAIN_REGEXP.test(v)
    ? undefined
    : `must be a DNS subdomain name, got "${v}"`;
}

function quantityOrEmpty(v: string): string | undefined {
  return v === "" || nonNegativeQuantity(v) !== undefined
    ? undefined
    : `must be a Kubernetes quantity such as 100m or 64Mi, got "${v}"`;
}

function jsonLabels(v: string): string | undefined {
  if (v === "") return undefined;
  try {
    const o = JSON.parse(v);
    if (
      o && typeof o === "object" && !Array.isArray(o) &&
      Object.values(o).every((x) => typeof x === "string")
    ) {
      return undefined;
    }
  } catch { /* fall through */ }
  return `must be a JSON object of string labels such as {"team":"storage"}, got ${
    JSON.stringify(v)
  }`;
}

/** Name of the coordination.k8s.io Lease the controller replicas elect a leader on. */
export const LEADER_LEASE_NAME = "s3-csi-controller";

/** Controller settings. */
export const CONTROLLER_OPTIONS = {
  reconciler: {
    type: "boolean",
    env: "RECONCILER",
    default: true,
    description:
      "Run the reconciler (Mountpoint Pods and attachments; needs the Kubernetes API). false: serve only the CSI services on --csi-endpoint, without any Kubernetes API access (the csi-provisioner Deployment)",
  },
  "csi-endpoint": {
    type: "string",
    env: "CSI_ENDPOINT",
    description:
      "Serve the CSI Identity/Controller services on this unix:// socket (for csi-provisioner)",
    validate: endpointProblem,
  },
  // S3 settings of the Controller service (dynamic provisioning), served on --csi-endpoint.
  ...PROVISIONING_OPTIONS,
  "mountpoint-namespace": {
    type: "string",
    env: "MOUNTPOINT_NAMESPACE",
    default: DEFAULT_MOUNTPOINT_NAMESPACE,
    description: "Namespace of the Mountpoint Pods",
    validate: dnsLabel,
  },
  "mountpoint-version": {
    type: "string",
    env: "MOUNTPOINT_VERSION",
    default: "",
    description: "Version of the FUSE engine in the Mountpoint image (label on Mountpoint Pods)",
  },
  ...MOUNTPOINT_POD_OPTIONS,
  "mountpoint-work-size-limit": {
    type: "string",
    env: "MOUNTPOINT_WORK_SIZE_LIMIT",
    default: DEFAULT_WORK_SIZE_LIMIT,
    description:
      "Size limit of the Mountpoint Pods' work emptyDir (engine HOME, rclone's files, the session table); the pod is evicted past it",
    validate: positiveSize,
  },
  "mountpoint-image-pull-policy": {
    type: "string",
    env: "MOUNTPOINT_IMAGE_PULL_POLICY",
    default: "IfNotPresent",
    choices: ["Always", "IfNotPresent", "Never"],
    description: "Image pull policy of the Mountpoint Pods",
  },
  "mountpoint-priority-class-name": {
    type: "string",
    env: "MOUNTPOINT_PRIORITY_CLASS_NAME",
    default: "mount-s3-critical",
    description: "PriorityClass of Mountpoint Pods (empty for none)",
    validate: dnsSubdomainOrEmpty,
  },
  "mountpoint-preempting-priority-class-name": {
    type: "string",
    env: "MOUNTPOINT_PREEMPTING_PRIORITY_CLASS_NAME",
    default: "",
    description:
      "PriorityClass of the Mountpoint Pods of workloads that reserved headroom (they preempt its headroom pods); headroom is on when this, --mountpoint-headroom-priority-class-name and --mountpoint-headroom-image are set",
    validate: dnsSubdomainOrEmpty,
  },
  "mountpoint-headroom-priority-class-name": {
    type: "string",
    env: "MOUNTPOINT_HEADROOM_PRIORITY_CLASS_NAME",
    default: "",
    description:
      "PriorityClass of headroom pods (negative, never preempting), which reserve room for workloads with the scheduling gate s3.csi.scality.com/reserve-headroom-for-mppod and their Mountpoint Pods",
    validate: dnsSubdomainOrEmpty,
  },
  "mountpoint-headroom-image": {
    type: "string",
    env: "MOUNTPOINT_HEADROOM_IMAGE",
    default: "",
    description: "Image of headroom pods (a pause image)",
    validate: imageOrEmpty,
  },
  "mountpoint-pod-labels": {
    type: "string",
    env: "MOUNTPOINT_POD_LABELS",
    default: "",
    description: "Extra labels for Mountpoint Pods, as a JSON object",
    validate: jsonLabels,
  },
  "mountpoint-cpu-request": {
    type: "string",
    env: "MOUNTPOINT_CPU_REQUEST",
    default: "50m",
    description: "Default CPU request of Mountpoint containers (a PV attribute overrides it)",
    validate: quantityOrEmpty,
  },
  "mountpoint-memory-request": {
    type: "string",
    env: "MOUNTPOINT_MEMORY_REQUEST",
    default: "64Mi",
    description: "Default memory request of Mountpoint containers",
    validate: quantityOrEmpty,
  },
  "mountpoint-memory-limit": {
    type: "string",
    env: "MOUNTPOINT_MEMORY_LIMIT",
    default: "",
    description: "Default memory limit of Mountpoint containers (empty: none)",
    validate: quantityOrEmpty,
  },
  "mountpoint-metrics-port": {
    type: "integer",
    env: "MOUNTPOINT_METRICS_PORT",
    default: 0,
    description:
      "Port where each Mountpoint Pod's engine serves the volume's Prometheus metrics (/metrics, labelled by volume and pod); 0 disables it",
    validate: (v: number) =>
      v >= 0 && v <= 65535 ? undefined : `must be a TCP port from 1 to 65535, or 0, got ${v}`,
  },
  "mountpoint-termination-grace": {
    type: "integer",
    env: "MOUNTPOINT_TERMINATION_GRACE_SECONDS",
    default: 600,
    description: "terminationGracePeriodSeconds of Mountpoint Pods (outlive workloads on drain)",
    validate: positive,
  },
  "tls-ca-configmap": {
    type: "string",
    env: "TLS_CA_CERT_CONFIGMAP",
    default: "",
    description:
      "ConfigMap (in the Mountpoint namespace) with key ca-bundle.crt, mounted into Mountpoint Pods",
    validate: dnsSubdomainOrEmpty,
  },
  workers: {
    type: "integer",
    default: 32,
    description: "Reconcile workers (keys are processed one at a time each)",
    validate: positive,
  },
  "stale-cleanup-interval": {
    type: "duration",
    env: "STALE_CLEANUP_INTERVAL",
    default: 120_000,
    description:
      "How often stale attachments are looked for (and once when the controller starts leading)",
  },
  "stale-attachment-threshold": {
    type: "duration",
    env: "STALE_ATTACHMENT_THRESHOLD",
    default: 120_000,
    description:
      "Age after which the periodic sweep removes an attachment of a vanished workload (the pass at start removes them whatever their age)",
  },
  "leader-elect": {
    type: "boolean",
    env: "LEADER_ELECT",
    default: true,
    description: "Run only while holding the leader Lease (safe with several replicas)",
  },
  "leader-election-namespace": {
    type: "string",
    env: "POD_NAMESPACE",
    default: "kube-system",
    description: "Namespace of the leader Lease",
    validate: dnsLabel,
  },
  "leader-election-lease-duration": {
    type: "duration",
    default: 15_000,
    description: "How long a leader Lease is valid without renewal",
  },
  "leader-election-renew-deadline": {
    type: "duration",
    default: 10_000,
    description: "A leader that cannot renew within this time steps down",
  },
  "leader-election-retry-period": {
    type: "duration",
    default: 2_000,
    description: "How often the Lease is renewed or tried",
  },
  "api-timeout": {
    type: "duration",
    env: "KUBE_API_TIMEOUT",
    default: 30_000,
    description:
      "Deadline of each Kubernetes API request (watches: until the response headers; their stream has an idle timeout)",
    validate: positive,
  },
  "metrics-address": {
    type: "string",
    env: "METRICS_ADDRESS",
    default: "127.0.0.1:8080",
    description: "host:port serving /metrics, /healthz and /readyz (empty: off)",
  },
  "shutdown-grace": {
    type: "duration",
    default: 10_000,
    description: "How long in-flight work may run after SIGTERM",
  },
} as const satisfies OptionSpecs;

/** Parsed controller settings. */
export type ControllerConfig = ParsedConfig<typeof CONTROLLER_OPTIONS>;
