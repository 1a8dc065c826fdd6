/**
 * The conformance setup: the node plugin (node-tier harness: API emulator with the S3PA CRD,
 * kubelet root, RGW), the `s3-csi-controller` process with `--csi-endpoint` (its own API
 * emulator, so its attachment sweeper never sees the hand-made S3PAs), the proxy that gives
 * csi-sanity kubelet-style targets and prepared attachments, and the two csi-sanity runs:
 *
 * 1. one main run per {@link VARIANTS} entry: `--csi.endpoint` = the proxy (Node service → node
 *    plugin; Identity → controller, see below), `--csi.controllerendpoint` = the controller's
 *    socket. Node and Controller specs, with that variant's StorageClass parameters and secrets.
 * 2. `identity`: `--csi.endpoint` = the node plugin's own socket, `--csi.controllerendpoint` = the
 *    controller's. Identity specs, which call both endpoints' Identity service.
 *
 * Why Identity goes to the controller in run 1: csi-sanity decides whether to run the Node
 * lifecycle specs ("should work", "should be idempotent") from the `--csi.endpoint`'s
 * GetPluginCapabilities (CONTROLLER_SERVICE). Our node plugin truthfully does not serve the
 * Controller service (it lives in another process, as in every Kubernetes deployment of a
 * split driver), so csi-sanity would skip those specs. The driver as a whole has a Controller
 * service, which the controller process's Identity service says.
 *
 * @module
 */
import { dirname } from "node:path";
import {
  type ApiServer,
  type ApiServerOptions,
  startApiServer,
} from "../testbed/apiserver/api_server.ts";
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { ListBucketsCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { ROOT, type Running, spawnBinary, waitFor } from "../_helpers.ts";
import { startHarness } from "../testbed/harness/node_harness.ts";
import { emptyAndDeleteBucket } from "../testbed/harness/s3_cleanup.ts";
import { unmountAllUnder } from "../testbed/harness/sys_helpers.ts";
import { Attachments, type AttachmentStats } from "./_attachments.ts";
import { decodeRequest } from "./_csi_proto.ts";
import { readStringField, toKubeletRequest } from "./_kubelet_paths.ts";
import { logTail, type LogTails } from "./_log_tail.ts";
import { startProxy } from "./_proxy.ts";
import { removeOwnTree } from "./_remove_tree.ts";
import { runSanity, type SanityRun } from "./_sanity.ts";

/** Name prefix of the tier's temp dir (sockets, secrets, parameters, reports). */
const WORK_PREFIX = "s3csi-conformance-";

/** Hook scripts given to csi-sanity. */
export const HOOKS = `${ROOT}tests/conformance/hooks`;

/** One way of provisioning and publishing the volumes of a main run. */
export interface Variant {
  /** Short name, part of each spec's test name. */
  readonly name: string;
  /** StorageClass parameters (`--csi.testvolumeparameters`). */
  parameters(ctx: { bucketNamePrefix: string; existingBucket: string }): Record<string, string>;
  /**
   * Provisioner (CreateVolume, DeleteVolume, ValidateVolumeCapabilities) and node-publish secrets
   * holding the RGW test user's keys (`--csi.secrets`): volumes then carry
   * `authenticationSource: secret`. Without: the controller's and node plugin's driver credentials.
   */
  readonly secrets: boolean;
}

/** The main runs. */
export const VARIANTS: readonly Variant[] = [
  {
    name: "bucket mode, secrets",
    parameters: ({ bucketNamePrefix }) => ({ bucketNamePrefix, deletePolicy: "delete-all" }),
    secrets: true,
  },
  {
    name: "prefix mode, driver credentials",
    parameters: ({ existingBucket }) => ({
      mode: "prefix",
      bucketName: existingBucket,
      deletePolicy: "delete-all",
    }),
    secrets: false,
  },
];

/** What the tier produced. */
export interface ConformanceResult {
  /** Main runs by variant name, and the identity run. */
  readonly runs: { readonly main: Record<string, SanityRun>; readonly identity: SanityRun };
  /** Things left behind or going wrong outside csi-sanity's own checks. */
  readonly problems: string[];
  /** Mountpoint Pods started / retired cleanly, and publishes checked to be real FUSE binds. */
  readonly mountpointPods: AttachmentStats;
  /** Node-service calls relayed by the proxy, by method. */
  readonly calls: Record<string, number>;
  readonly seconds: number;
  /** The last lines of the node plugin's and the controller's logs (printed when a spec fails). */
  readonly logs: LogTails;
}

/** The tier could not finish; {@link logs} holds the driver processes' log tails. */
export class ConformanceError extends Error {
  override readonly name = "ConformanceError";
  /** Filled in once the processes are stopped (before the caller sees the error). */
  readonly logs: LogTails;
  constructor(message: string, logs: LogTails, options?: ErrorOptions) {
    super(message, options);
    this.logs = logs;
  }
}

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  readonly bin: string;
  /** Full texts of the specs to skip in the main run (`--ginkgo.skip`). */
  readonly skip: readonly string[];
  /** Where to log progress. */
  readonly log: (line: string) => void;
  /** Where the tier's temp dir is made. @default Deno's temp dir (`TMPDIR` or `/tmp`) */
  readonly tempParent?: string;
  /** Starts the controller's API emulator (tests inject a failure). @default startApiServer */
  readonly startApi?: (options: ApiServerOptions) => Promise<ApiServer>;
}

/** Ginkgo matches focus/skip regexps against the suite name, the containers and the spec. */
const SUITE = "CSI Driver Test Suite";

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A regexp matching exactly one spec's full text (for `--ginkgo.skip` / `--ginkgo.focus`). */
export function specRegExp(name: string): string {
  return `^${escapeRegExp(`${SUITE} ${name}`)}$`;
}

/** The Identity specs, which the `identity` run covers. */
const IDENTITY = `^${SUITE} Identity Service `;

async function listDir(path: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(path)) out.push(e.name);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return out.sort();
}

/** Start everything, run csi-sanity twice, check what is left, stop everything. */
export async function runConformance(o: ConformanceOptions): Promise<ConformanceResult> {
  const t0 = performance.now();
  const problems: string[] = [];
  // mount-s3 on RGW: csi-sanity only mounts, lists and unmounts (Mountpoint's reads and listings
  // work on RGW; its writes do not, and rclone cannot serve volumes without allow-delete).
  await using h = await startHarness({ defaultEngine: "mount-s3" });
  const root = h.root;
  // Kubelet's pods dir exists before any pod: the hooks must not create it 0750 (the mounter runs
  // as uid 1000 and reaches its comm dir through it).
  await Deno.mkdir(`${root}/pods`, { mode: 0o755 }).catch(() => {});
  const work = await Deno.makeTempDir({
    prefix: WORK_PREFIX,
    ...(o.tempParent ? { dir: o.tempParent } : {}),
  });
  const controllerSock = `${work}/controller.sock`;
  const prefix = `cs${crypto.randomUUID().slice(0, 6)}-`;
  let api: ApiServer | undefined;
  let controller: Running | undefined;
  const logs: LogTails = { node: "", controller: "" };
  try {
    // Inside the try: when the emulator cannot start, the finally below still removes `work`.
    // Its kubeconfig is written into `work`, so nothing else is left in the temp dir.
    api = await (o.startApi ?? startApiServer)({
      podTerminationMs: 0,
      kubeconfigPath: `${work}/controller.kubeconfig`,
    });
    controller = spawnBinary("controller", [
      `--csi-endpoint=unix://${controllerSock}`,
      "--leader-elect=false",
      "--metrics-address=",
    ], {
      KUBECONFIG: api.kubeconfigPath,
      AWS_ENDPOINT_URL: h.rgw.S3_ENDPOINT!,
      AWS_REGION: h.rgw.AWS_REGION ?? "us-east-1",
      AWS_ACCESS_KEY_ID: h.rgw.AWS_ACCESS_KEY_ID!,
      AWS_SECRET_ACCESS_KEY: h.rgw.AWS_SECRET_ACCESS_KEY!,
    });
    await waitFor("the controller's CSI socket", async () => {
      if (controller!.stderr().includes("error:")) {
        throw new Error(`s3-csi-controller failed: ${controller!.stderr().slice(-2000)}`);
      }
      return (await Deno.stat(controllerSock).catch(() => undefined))?.isSocket;
    }, { timeoutMs: 60_000, intervalMs: 100 });

    const keys = `  access_key_id: ${h.rgw.AWS_ACCESS_KEY_ID}\n` +
      `  secret_access_key: ${h.rgw.AWS_SECRET_ACCESS_KEY}\n`;
    const secrets = `${work}/secrets.yaml`;
    await Deno.writeTextFile(
      secrets,
      [
        "CreateVolumeSecret",
        "DeleteVolumeSecret",
        "ControllerValidateVolumeCapabilitiesSecret",
        "NodePublishVolumeSecret",
      ].map((k) => `${k}:\n${keys}`).join(""),
      { mode: 0o600 },
    );

    const attachments = new Attachments(h);
    await using proxy = await startProxy({
      socketPath: `${work}/proxy.sock`,
      backends: { node: `${root}/csi.sock`, controller: controllerSock },
      route: (service) => (service === "Identity" ? "controller" : "node"),
      async before(call) {
        const forwarded = toKubeletRequest(root, call.method, call.request);
        if (call.method === "NodePublishVolume") {
          const req = decodeRequest<NodePublishVolumeRequest>("Node", call.method, forwarded);
          await attachments.prepare(req, req.targetPath ?? "");
        }
        return forwarded;
      },
      async after(call, forwarded, code) {
        if (code !== 0) return;
        if (call.method === "NodePublishVolume") {
          await attachments.verifyPublished(readStringField(forwarded, 4) ?? "");
        } else if (call.method === "NodeUnpublishVolume") {
          attachments.release(readStringField(forwarded, 2) ?? "");
        }
      },
    });

    const common = [
      `--csi.controllerendpoint=unix://${controllerSock}`,
      `--csi.mountdir=${root}/pods/sanity-target`,
      `--csi.stagingdir=${root}/plugins/sanity-staging`,
      `--csi.createmountpathcmd=${HOOKS}/create_target.sh`,
      `--csi.removemountpathcmd=${HOOKS}/remove_target.sh`,
      `--csi.createstagingpathcmd=${HOOKS}/create_staging.sh`,
      `--csi.removestagingpathcmd=${HOOKS}/remove_staging.sh`,
      `--csi.checkpathcmd=${HOOKS}/check_path.sh`,
    ];
    const env = {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      CONFORMANCE_KUBELET_ROOT: root,
    };
    const main: Record<string, SanityRun> = {};
    for (const [i, v] of VARIANTS.entries()) {
      const params = `${work}/parameters-${i}.yaml`;
      const values = v.parameters({ bucketNamePrefix: prefix, existingBucket: h.bucket });
      await Deno.writeTextFile(
        params,
        Object.entries(values).map(([k, val]) => `${k}: ${JSON.stringify(val)}\n`).join(""),
      );
      o.log(`csi-sanity main run (${v.name}): node plugin through the proxy, controller`);
      const run = await runSanity(o.bin, [
        `--csi.endpoint=unix://${work}/proxy.sock`,
        ...common,
        `--csi.testvolumeparameters=${params}`,
        ...(v.secrets ? [`--csi.secrets=${secrets}`] : []),
        `--ginkgo.skip=${IDENTITY}`,
        ...o.skip.map((s) => `--ginkgo.skip=${specRegExp(s)}`),
      ], { reportPath: `${work}/main-${i}.xml`, env, timeoutMs: 20 * 60_000 });
      o.log(`csi-sanity main run (${v.name}): exit ${run.code} in ${run.seconds.toFixed(1)} s`);
      main[v.name] = run;
    }
    const identity = await runSanity(o.bin, [
      `--csi.endpoint=unix://${root}/csi.sock`,
      ...common,
      `--ginkgo.focus=${IDENTITY}`,
    ], { reportPath: `${work}/identity.xml`, env, timeoutMs: 5 * 60_000 });
    o.log(`csi-sanity identity run: exit ${identity.code} in ${identity.seconds.toFixed(1)} s`);

    // What a cluster would be left with.
    problems.push(...await attachments.drain());
    problems.push(...proxy.hookErrors);
    const mounts = await h.ourMounts();
    if (mounts.length) problems.push(`mounts left under the kubelet root: ${mounts.join(", ")}`);
    const pods = await listDir(`${root}/pods`);
    if (pods.length) problems.push(`pod dirs left in ${root}/pods: ${pods.join(", ")}`);
    const sources = await listDir(`${root}/plugins/s3.csi.scality.com/mnt`);
    if (sources.length) problems.push(`source mount dirs left: ${sources.join(", ")}`);
    const staging = await listDir(`${root}/plugins/kubernetes.io/csi/s3.csi.scality.com`);
    if (staging.length) problems.push(`staging dirs left: ${staging.join(", ")}`);
    for (const p of h.mpPods) {
      const done = await Promise.race([
        p.mounter.child.status.then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), 100)),
      ]);
      if (!done) problems.push(`mounter of Mountpoint Pod ${p.name} is still running`);
    }
    const objects = await h.s3.send(new ListObjectsV2Command({ Bucket: h.bucket }));
    if (objects.KeyCount) {
      problems.push(
        `objects left in ${h.bucket} by prefix-mode volumes (DeleteVolume did not remove them): ${
          (objects.Contents ?? []).map((c) => c.Key).join(", ")
        }`,
      );
    }
    const listed = await h.s3.send(new ListBucketsCommand({}));
    const buckets = (listed.Buckets ?? []).map((b) => b.Name!).filter((n) => n.startsWith(prefix));
    if (buckets.length) {
      problems.push(`buckets left on S3 (DeleteVolume did not remove them): ${buckets.join(", ")}`);
      for (const b of buckets) await emptyAndDeleteBucket(h.s3, b).catch(() => {});
    }
    const calls: Record<string, number> = Object.fromEntries(proxy.counts);
    return {
      runs: { main, identity },
      problems,
      mountpointPods: { ...attachments.stats },
      calls,
      seconds: (performance.now() - t0) / 1000,
      logs,
    };
  } catch (err) {
    throw new ConformanceError(
      `the conformance run failed: ${err instanceof Error ? err.message : String(err)}`,
      logs,
      { cause: err },
    );
  } finally {
    const code = await controller?.stop("SIGTERM", 20_000).catch((e) => String(e));
    if (controller && code !== 0) {
      problems.push(`s3-csi-controller exit ${code}: ${controller.stderr().slice(-1500)}`);
    }
    // The harness's node plugin is still running (it stops with the harness): its log so far.
    logs.node = logTail(h.node.stderr());
    logs.controller = logTail(controller?.stderr() ?? "");
    await api?.stop();
    // Nothing may stay mounted even when a step above threw.
    if ((await readMountInfo()).some((m) => m.mountPoint.startsWith(`${root}/`))) {
      await unmountAllUnder(root);
    }
    await removeOwnTree(work, { parent: dirname(work), namePrefix: WORK_PREFIX }).catch((err) => {
      problems.push(`work dir ${work} not removed: ${err instanceof Error ? err.message : err}`);
    });
  }
}
