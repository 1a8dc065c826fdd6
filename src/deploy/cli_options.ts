/**
 * Flags of `deno task render`, `deno task deploy` and `deno task undeploy`.
 *
 * @module
 */
import type { OptionSpecs } from "../util/config.ts";

/** Where the values come from (all three commands). */
export const VALUES_OPTIONS = {
  values: {
    type: "string",
    description: "YAML/JSON values file(s), comma-separated; later files win",
  },
  set: {
    type: "string",
    description: "Override values: path=value[,path=value…] (\\, for a literal comma)",
  },
  "driver-version": {
    type: "string",
    env: "S3CSI_VERSION",
    description:
      "Deploy this driver version (values version and the default image.tag) instead of deno.json's: images built with the same S3CSI_VERSION (deno task images:local)",
  },
} as const satisfies OptionSpecs;

/** `deno task render`. */
export const RENDER_OPTIONS = {
  ...VALUES_OPTIONS,
  out: {
    type: "string",
    default: "-",
    description: "Write <dir>/s3-csi-driver.yaml instead of printing to stdout (-)",
  },
} as const satisfies OptionSpecs;

/** Cluster access (deploy and undeploy). */
const CLUSTER_OPTIONS = {
  kubeconfig: {
    type: "string",
    description:
      "kubeconfig file, used alone (default: the files of KUBECONFIG merged as kubectl does, else ~/.kube/config)",
  },
  context: {
    type: "string",
    description:
      "kubeconfig context (default: the current-context of the first file that sets one)",
  },
  "allow-insecure-http": {
    type: "boolean",
    default: false,
    description:
      "Accept an http:// API server (credentials and objects travel unencrypted; for local test servers only)",
  },
  "dry-run": {
    type: "boolean",
    default: false,
    description: "Validate, read the cluster and report what would change; write nothing",
  },
  "no-wait": {
    type: "boolean",
    default: false,
    description: "Do not wait for rollout (or deletion)",
  },
} as const satisfies OptionSpecs;

/** `deno task deploy`. */
export const DEPLOY_OPTIONS = {
  ...VALUES_OPTIONS,
  ...CLUSTER_OPTIONS,
  "wait-timeout": {
    type: "duration",
    default: 180_000,
    description: "How long to wait for the Deployment and DaemonSet to roll out",
  },
  "crd-timeout": {
    type: "duration",
    default: 30_000,
    description: "How long to wait for the CRD to be Established",
  },
} as const satisfies OptionSpecs;

/** `deno task undeploy`. */
export const UNDEPLOY_OPTIONS = {
  ...VALUES_OPTIONS,
  ...CLUSTER_OPTIONS,
  purge: {
    type: "boolean",
    default: false,
    description: "Also delete the CRD, every attachment and the Mountpoint namespace",
  },
  force: {
    type: "boolean",
    default: false,
    description: "Proceed although attachments exist (volumes are mounted)",
  },
  "wait-timeout": {
    type: "duration",
    default: 120_000,
    description: "How long to wait for deleted objects to disappear",
  },
} as const satisfies OptionSpecs;
