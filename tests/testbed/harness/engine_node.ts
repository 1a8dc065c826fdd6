/**
 * Harness of the engine-through-the-node tier: the node plugin process → the mounter (uid 1000,
 * as a Mountpoint Pod) → our `mount-s3` on real FUSE, against a private versitygw (HTTP, or HTTPS
 * with a private CA). It is the node tier's harness (`tests/testbed/harness/node_harness.ts`) with
 * `s3: "versitygw"`, whose default engine is mount-s3; this file adds one-call publishing of a
 * volume with given mount options and attributes.
 *
 * Needs root, /dev/fuse, setpriv, our mount-s3 (`scripts/build_engine.sh`, or
 * `S3CSI_ENGINE_BIN`), versitygw (`tests/testbed/services/versitygw/build.sh`, Go from the module
 * proxy) and a checkout uid 1000 can read; skips with the reason otherwise.
 *
 * @module
 */
import type { NodePublishVolumeRequest } from "../../../src/csi/gen/csi_types.ts";
import {
  type Harness,
  type HarnessOptions,
  kubeletMkdirParent,
  type MpPod,
  type MpPodOptions,
  nodeTest,
  skipReason,
  startHarness,
} from "./node_harness.ts";
import { runToEnd, waitFor } from "../../_helpers.ts";

/** Harness options of this tier. */
export const TIER = { s3: "versitygw" } as const;

/** Why this tier cannot run here. */
export function engineNodeReason(): string | undefined {
  return skipReason(TIER);
}

/** A test of this tier (skipped with the reason when it cannot run). */
export function engineNodeTest(name: string, fn: (t: Deno.TestContext) => Promise<void>): void {
  nodeTest(`engine-node: ${name}`, fn, TIER);
}

/** Start the node harness on a private versitygw with mount-s3 as the default engine. */
export function startEngineNode(options: Omit<HarnessOptions, "s3"> = {}): Promise<Harness> {
  return startHarness({ ...options, ...TIER });
}

/** A published volume. */
export interface Published {
  readonly pv: string;
  readonly volumeId: string;
  readonly podUID: string;
  /** The workload's target path (where the workload sees the bucket). */
  readonly target: string;
  /** The Mountpoint Pod serving it. */
  readonly mp: MpPod;
  /** The request that published it (to publish again). */
  readonly request: NodePublishVolumeRequest;
  /** How long the NodePublishVolume call took (ms), without creating the Mountpoint Pod. */
  readonly publishMs: number;
}

/** What to publish. */
export interface PublishOptions {
  /** PV `mountOptions` (CSI mount flags). @default [] */
  readonly flags?: string[];
  /** More volume attributes (besides `bucketName`). */
  readonly context?: Record<string, string>;
  /** @default MULTI_NODE_MULTI_WRITER */
  readonly mode?: "MULTI_NODE_MULTI_WRITER" | "MULTI_NODE_READER_ONLY";
  /** The pod volume's `readOnly`. */
  readonly readonly?: boolean;
  /** The workload's fsGroup. */
  readonly volumeMountGroup?: string;
  /** The Mountpoint Pod to create (cache volume, CA bundle, …). */
  readonly pod?: MpPodOptions;
}

let seq = 0;

/** A fresh PV, workload and Mountpoint Pod, assigned and published through the node plugin. */
export async function publishVolume(h: Harness, o: PublishOptions = {}): Promise<Published> {
  const n = ++seq;
  const pv = `pv-${n}`;
  const volumeId = `vol-${pv}`;
  const podUID = `uid-${n}`;
  const mp = await h.mountpointPod(`mp-${n}`, o.pod);
  await h.assign(pv, volumeId, mp.name, [podUID]);
  const target = h.target(podUID, pv);
  await kubeletMkdirParent(target);
  const request: NodePublishVolumeRequest = {
    volumeId,
    targetPath: target,
    volumeCapability: {
      mount: {
        mountFlags: o.flags ?? [],
        ...(o.volumeMountGroup ? { volumeMountGroup: o.volumeMountGroup } : {}),
      },
      accessMode: { mode: o.mode ?? "MULTI_NODE_MULTI_WRITER" },
    },
    volumeContext: {
      bucketName: h.bucket,
      "csi.storage.k8s.io/pod.uid": podUID,
      ...(o.context ?? {}),
    },
    ...(o.readonly ? { readonly: true } : {}),
  };
  const t0 = performance.now();
  await h.csi.node.nodePublishVolume(request);
  const publishMs = performance.now() - t0;
  return { pv, volumeId, podUID, target, mp, request, publishMs };
}

/** The pid of the mount-s3 process a Mountpoint Pod's mounter runs. */
export async function enginePid(mp: MpPod): Promise<number> {
  return await waitFor("the mount-s3 process", async () => {
    const r = await runToEnd("pgrep", ["-P", String(mp.mounter.child.pid), "-x", "mount-s3"]);
    const pid = r.stdout.trim().split("\n")[0];
    return pid ? Number(pid) : undefined;
  });
}

/** The command line of a process. */
export async function cmdline(pid: number): Promise<string[]> {
  return (await Deno.readTextFile(`/proc/${pid}/cmdline`)).split("\0").filter(Boolean);
}

/** The environment of a process (`/proc/<pid>/environ`). */
export async function environ(pid: number): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of (await Deno.readTextFile(`/proc/${pid}/environ`)).split("\0")) {
    const i = e.indexOf("=");
    if (i > 0) out[e.slice(0, i)] = e.slice(i + 1);
  }
  return out;
}
