/**
 * Flags of `deno task sandbox`.
 *
 * @module
 */
import type { OptionSpecs } from "../../../src/util/config.ts";
import { DEFAULT_SCENARIO, scenarioHelp, SCENARIOS } from "../../scenarios/registry.ts";

/** S3 server choices. */
export const S3_CHOICES = ["auto", "versitygw", "rgw", "s3rver"] as const;
/** FUSE engine choices of the sandbox's volumes. */
export const ENGINE_CHOICES = ["auto", "mount-s3", "rclone"] as const;

/** Sandbox settings. */
export const SANDBOX_OPTIONS = {
  keep: {
    type: "boolean",
    default: false,
    description: "Leave everything running (workload included) until Ctrl-C, then tear down",
  },
  nodes: {
    type: "integer",
    default: 2,
    description: "Number of emulated nodes (1 or 2)",
    validate: (n: number) => (n === 1 || n === 2 ? undefined : `must be 1 or 2, got ${n}`),
  },
  s3: {
    type: "string",
    env: "SANDBOX_S3",
    default: "auto",
    choices: S3_CHOICES,
    description:
      "S3 server: auto (versitygw, else RGW as root, else s3rver; with --real-node versitygw when the Mountpoint image has mount-s3, whose writes Ceph RGW 16 refuses), versitygw, rgw, s3rver",
  },
  engine: {
    type: "string",
    env: "SANDBOX_ENGINE",
    default: "auto",
    choices: ENGINE_CHOICES,
    description:
      "FUSE engine of the volumes (the node plugins' --default-engine): auto (mount-s3 on versitygw when scripts/build_engine.sh built it, else rclone: Mountpoint's writes fail on RGW 16.2), mount-s3, rclone",
  },
  dir: {
    type: "string",
    description: "State directory (default: a new /tmp/s3csi-sandbox-*; removed on success)",
  },
  timeout: {
    type: "duration",
    default: 120_000,
    description:
      "Longest wait of any step (binding, attachment, mount, the workload's run, deletion, release, start-up); a step that runs out fails the sandbox, naming what it waited for",
  },
  "real-apiserver": {
    type: "boolean",
    default: false,
    description:
      "Use the real kube-apiserver tier (tests/testbed/services/kube_real/: etcd, kube-apiserver, kube-controller-manager) instead of the API emulator; reused if already running, stopped at the end only if started here",
  },
  "real-node": {
    type: "boolean",
    default: false,
    description:
      "Run on a real single-node cluster (tests/testbed/services/real_node/: kubelet + containerd + a real control plane) with the driver installed by `deno task deploy` (our images built locally, sidecar stand-ins); one node; reused if already running, stopped at the end only if started here",
  },
  scenario: {
    type: "string",
    choices: Object.keys(SCENARIOS),
    description:
      `The scenario of tests/scenarios/ to run (the modules the e2e and real-node tiers run); default ${DEFAULT_SCENARIO}. Those marked --real-node need it (a second real node is started for one that needs two). With --scenario, exit 0 only when every step completed (a skipped step fails too). Scenarios: ${scenarioHelp()}`,
  },
  "without-controller": {
    type: "boolean",
    default: false,
    description:
      "Do not start the controller: the steps that need it fail after --timeout (shows that the sandbox fails closed)",
  },
} as const satisfies OptionSpecs;
