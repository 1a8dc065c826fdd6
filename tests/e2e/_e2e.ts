/**
 * The e2e tier's harness: one sandbox ({@link SandboxEnv}: API emulator, scheduler, PV binder,
 * kubelet emulators, node plugin processes, Ceph RGW of its own) per test file, plus the controller
 * process serving the CSI Controller service and the csi-provisioner emulation, so static and
 * dynamic volumes both work. Each scenario is a `t.step` that creates objects with unique names
 * and deletes them again; the sandbox is stopped at the end of the file's test and the run fails
 * when a Mountpoint Pod is not released, a driver process crashed (a node plugin restart counts),
 * or anything is left mounted or running under its state dir.
 *
 * Needs root, /dev/fuse, rclone and Ceph RGW (`radosgw`); skips with the reason otherwise.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { ApiEventRecorder } from "../../src/kube/event_recorder.ts";
import { EVENTS, PODS, PVCS, PVS, SECRETS } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import {
  COMPONENT_MOUNTPOINT_POD,
  DEFAULT_MOUNTPOINT_NAMESPACE,
  LABEL_COMPONENT,
} from "../../src/mppod/labels.ts";
import { Provisioner } from "../testbed/csi_provisioner/provisioner.ts";
import { ChildProcess } from "../testbed/sandbox/child_process.ts";
import { describeCrashes } from "../testbed/sandbox/child_process.ts";
import { cleanUpLeftovers, leftoversOf, processesUsing } from "../testbed/sandbox/leftovers.ts";
import { SandboxEnv } from "../testbed/sandbox/sandbox_env.ts";
import type { S3Env } from "../testbed/sandbox/s3_server.ts";
import { StepReporter } from "../testbed/sandbox/step_reporter.ts";
import { type MountInfo, readMountInfo } from "../../src/sys/mountinfo.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import { errorMessage } from "../../src/util/errors.ts";
import { waitFor } from "../_helpers.ts";

/** Namespace of the workloads. */
export const NS = "default";

function commandExists(name: string): boolean {
  return new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null" })
    .outputSync().success;
}

/** Why the e2e tier cannot run on this machine, or undefined. */
export function e2eSkipReason(): string | undefined {
  if (Deno.build.os !== "linux") return "needs Linux";
  if (Deno.uid() !== 0) return "needs root (FUSE mounts, pods under other uids, RGW)";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  if (!commandExists("rclone")) return "needs rclone (the FUSE engine)";
  if (!commandExists("radosgw")) {
    return "needs Ceph RGW (radosgw): run tests/testbed/services/s3/rgw_start.sh once to install it";
  }
  if (!commandExists("setpriv")) return "needs setpriv (util-linux)";
  return undefined;
}

/** A short random suffix for unique names. */
export function unique(): string {
  return crypto.randomUUID().slice(0, 8);
}

/** A volume of {@link E2E.pod}. */
export interface PodVolume {
  readonly claim: string;
  readonly mountPath: string;
  /** `persistentVolumeClaim.readOnly` (and the mount's `readOnly`). */
  readonly readOnly?: boolean;
}

/** Settings of {@link E2E.pod}. */
export interface PodOptions {
  readonly name: string;
  /** `sh -c` script; mount paths in it are rewritten to the host paths by the kubelet. */
  readonly script: string;
  readonly volumes: readonly PodVolume[];
  readonly runAsUser?: number;
  readonly runAsGroup?: number;
  /** Omitted when null. @default 1000 */
  readonly fsGroup?: number | null;
  /** @default "Never" */
  readonly restartPolicy?: "Never" | "OnFailure" | "Always";
  /** Pin to a node. */
  readonly node?: string;
  readonly env?: Record<string, string>;
}

/** Settings of {@link E2E.staticVolume}. */
export interface StaticVolumeOptions {
  readonly bucket: string;
  readonly mountOptions?: string[];
  readonly accessModes?: string[];
  readonly attributes?: Record<string, string>;
  /** `nodePublishSecretRef` (namespace {@link NS}). */
  readonly secret?: string;
}

/** An event as the tests read it. */
export interface KubeEvent extends KubeObject {
  reason?: string;
  message?: string;
  type?: string;
  involvedObject?: { uid?: string; name?: string; kind?: string };
}

interface S3paLike extends KubeObject {
  spec?: { mountpointS3PodAttachments?: Record<string, { workloadPodUID: string }[]> };
}

/** One running sandbox and helpers to drive it. */
export class E2E {
  readonly env: SandboxEnv;
  readonly dir: string;
  provisioner: Provisioner | undefined;

  constructor(env: SandboxEnv, dir: string) {
    this.env = env;
    this.dir = dir;
  }

  get client(): KubeClient {
    return this.env.client!;
  }

  get s3(): S3Client {
    return this.env.s3Client!;
  }

  /** The sandbox RGW's settings (incl. the second user's keys). */
  get s3Env(): S3Env {
    return this.env.s3!.env;
  }

  /** An S3 client of the second RGW user. */
  otherS3(): S3Client {
    const e = this.s3Env;
    return new S3Client({
      endpoint: e.S3_ENDPOINT,
      region: e.AWS_REGION,
      forcePathStyle: true,
      credentials: {
        accessKeyId: e.S3_OTHER_ACCESS_KEY_ID!,
        secretAccessKey: e.S3_OTHER_SECRET_ACCESS_KEY!,
      },
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
  }

  /** Create a bucket (with `client`, default the main user); returns its name. */
  async bucket(prefix: string, client: S3Client = this.s3): Promise<string> {
    const name = `${prefix}-${unique()}`;
    await client.send(new CreateBucketCommand({ Bucket: name }));
    return name;
  }

  /** Empty and delete a bucket (best effort; the sandbox's RGW is purged at the end anyway). */
  async dropBucket(bucket: string, client: S3Client = this.s3): Promise<void> {
    try {
      const list = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      for (const o of list.Contents ?? []) {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }));
      }
      await client.send(new DeleteBucketCommand({ Bucket: bucket }));
    } catch { /* best effort */ }
  }

  /** Put an object. */
  async put(
    bucket: string,
    key: string,
    body: string,
    client: S3Client = this.s3,
  ): Promise<void> {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  }

  /** An object's body as text. */
  async get(bucket: string, key: string, client: S3Client = this.s3): Promise<string> {
    const r = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return await r.Body!.transformToString();
  }

  /** Keys of a bucket (optionally under a prefix). */
  async keys(bucket: string, prefix?: string, client: S3Client = this.s3): Promise<string[]> {
    const r = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, ...(prefix ? { Prefix: prefix } : {}) }),
    );
    return (r.Contents ?? []).map((o) => o.Key!).sort();
  }

  /** A Secret in {@link NS} with node-publish keys. */
  async secret(name: string, accessKeyId: string, secretAccessKey: string): Promise<void> {
    await this.client.create(SECRETS, {
      metadata: { name, namespace: NS },
      type: "Opaque",
      data: { access_key_id: btoa(accessKeyId), secret_access_key: btoa(secretAccessKey) },
    } as KubeObject);
  }

  /** A static PV (Retain) and its PVC, both named `name`, waited until Bound. */
  async staticVolume(name: string, o: StaticVolumeOptions): Promise<void> {
    const accessModes = o.accessModes ?? ["ReadWriteMany"];
    await this.client.create(PVS, {
      metadata: { name },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes,
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: "",
        mountOptions: o.mountOptions ?? ["allow-delete", "allow-overwrite"],
        csi: {
          driver: DRIVER_NAME,
          volumeHandle: `static-${name}`,
          volumeAttributes: { bucketName: o.bucket, ...o.attributes },
          ...(o.secret ? { nodePublishSecretRef: { name: o.secret, namespace: NS } } : {}),
        },
      },
    } as KubeObject);
    await this.client.create(PVCS, {
      metadata: { name, namespace: NS },
      spec: {
        accessModes,
        storageClassName: "",
        resources: { requests: { storage: "1Gi" } },
        volumeName: name,
      },
    } as KubeObject);
    await this.waitBound(name);
  }

  /** Wait until the PVC `name` is Bound. */
  async waitBound(name: string, timeoutMs = 30_000): Promise<void> {
    await waitFor(`PVC ${name} Bound`, async () => {
      const p = await this.client.get<KubeObject & { status?: { phase?: string } }>(
        PVCS,
        name,
        NS,
      );
      return p?.status?.phase === "Bound";
    }, { timeoutMs, intervalMs: 150 });
  }

  /** Delete a PVC and its (static) PV. */
  async dropVolume(name: string): Promise<void> {
    await this.client.delete(PVCS, name, NS).catch(() => false);
    await this.client.delete(PVS, name).catch(() => false);
  }

  /** Create a workload pod running `sh -c script`. */
  async pod(o: PodOptions): Promise<Pod> {
    const fsGroup = o.fsGroup === undefined ? 1000 : o.fsGroup;
    return await this.client.create<Pod>(PODS, {
      metadata: { name: o.name, namespace: NS },
      spec: {
        restartPolicy: o.restartPolicy ?? "Never",
        terminationGracePeriodSeconds: 3,
        ...(o.node ? { nodeSelector: { "kubernetes.io/hostname": o.node } } : {}),
        securityContext: {
          runAsUser: o.runAsUser ?? 1000,
          runAsGroup: o.runAsGroup ?? 1000,
          ...(fsGroup !== null ? { fsGroup } : {}),
        },
        containers: [{
          name: "main",
          image: "busybox",
          command: ["sh", "-c", o.script],
          env: Object.entries(o.env ?? {}).map(([name, value]) => ({ name, value })),
          volumeMounts: o.volumes.map((v, i) => ({
            name: `v${i}`,
            mountPath: v.mountPath,
            ...(v.readOnly ? { readOnly: true } : {}),
          })),
        }],
        volumes: o.volumes.map((v, i) => ({
          name: `v${i}`,
          persistentVolumeClaim: { claimName: v.claim, ...(v.readOnly ? { readOnly: true } : {}) },
        })),
      },
    } as unknown as Pod);
  }

  /** FailedMount (or any `reason`) events of a pod. */
  async events(pod: Pod, reason = "FailedMount"): Promise<KubeEvent[]> {
    return (await this.client.list<KubeEvent>(EVENTS, { namespace: NS })).items.filter((e) =>
      e.reason === reason && e.involvedObject?.uid === pod.metadata.uid
    );
  }

  /** Container output of a pod (current run). */
  async log(pod: Pod): Promise<string> {
    for (const n of this.env.nodes) {
      const path = n.kubelet.containerLogPath(pod.metadata.uid, "main") ??
        `${n.root}/pod-logs/${NS}_${pod.metadata.name}_${pod.metadata.uid}/main/0.log`;
      const text = await Deno.readTextFile(path).catch(() => undefined);
      if (text !== undefined) return text;
    }
    return "";
  }

  /** Why a pod is not done: last FailedMount event and the container output. */
  async #diagnose(pod: Pod): Promise<string> {
    const last = (await this.events(pod)).at(-1)?.message;
    const p = await this.client.get<Pod>(PODS, pod.metadata.name, NS);
    // The node plugins' own words (restarts included) explain most publish failures.
    const plugins = await Promise.all(this.env.nodes.map(async (n) => {
      const text = await Deno.readTextFile(n.plugin.logPath).catch(() => "");
      return `\n--- ${n.name} node plugin (restarts ${n.plugin.restarts}), last lines:\n${
        text.slice(-1500)
      }`;
    }));
    return `phase ${p?.status?.phase ?? "gone"}${last ? `; last FailedMount: ${last}` : ""}; log: ${
      JSON.stringify((await this.log(pod)).slice(-800))
    }${plugins.join("")}`;
  }

  /** Wait until a pod reached one of `phases` (Failed is an error unless listed). */
  async waitPhase(pod: Pod, phases: string[], timeoutMs = 60_000): Promise<Pod> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const p = await this.client.get<Pod>(PODS, pod.metadata.name, NS);
      const phase = p?.status?.phase ?? "";
      if (phases.includes(phase)) return p!;
      if (phase === "Failed") {
        throw new Error(`pod ${pod.metadata.name} failed: ${await this.#diagnose(pod)}`);
      }
      if (Date.now() > deadline) {
        throw new Error(
          `pod ${pod.metadata.name} not ${phases.join("/")} within ${
            timeoutMs / 1000
          } s: ${await this
            .#diagnose(pod)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Run a pod to completion; returns its output. */
  async run(o: PodOptions, timeoutMs = 60_000): Promise<string> {
    const pod = await this.pod(o);
    try {
      await this.waitPhase(pod, ["Succeeded"], timeoutMs);
      return await this.log(pod);
    } finally {
      await this.deletePod(pod.metadata.name);
    }
  }

  /** Wait until a running pod printed `marker`. */
  async waitLog(pod: Pod, marker: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await this.log(pod)).includes(marker)) {
      const p = await this.client.get<Pod>(PODS, pod.metadata.name, NS);
      if (p?.status?.phase === "Failed" || p?.status?.phase === "Succeeded") {
        throw new Error(`pod ${pod.metadata.name} ended: ${await this.#diagnose(pod)}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`pod ${pod.metadata.name} did not print ${marker}: ${await this.#diagnose(
          pod,
        )}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Delete a pod and wait until it is gone (unpublished). */
  async deletePod(name: string, timeoutMs = 60_000): Promise<void> {
    await this.client.delete(PODS, name, NS).catch(() => false);
    await waitFor(`pod ${name} gone`, async () => !(await this.client.get(PODS, name, NS)), {
      timeoutMs,
      intervalMs: 150,
    });
  }

  /** Mountpoint Pods. */
  async mountpointPods(): Promise<Pod[]> {
    return (await this.client.list<Pod>(PODS, {
      namespace: DEFAULT_MOUNTPOINT_NAMESPACE,
      labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
    })).items;
  }

  /** S3PAs. */
  async s3pas(): Promise<S3paLike[]> {
    return (await this.client.list<S3paLike>(S3PAS)).items;
  }

  /** The Mountpoint Pod serving a workload pod (from the S3PAs). */
  async mountpointPodOf(pod: Pod): Promise<string | undefined> {
    for (const s of await this.s3pas()) {
      for (const [mp, ws] of Object.entries(s.spec?.mountpointS3PodAttachments ?? {})) {
        if (ws.some((w) => w.workloadPodUID === pod.metadata.uid)) return mp;
      }
    }
    return undefined;
  }

  /** Wait until the controller released every Mountpoint Pod and S3PA. */
  async waitReleased(timeoutMs = 45_000): Promise<void> {
    await waitFor(
      "Mountpoint Pods and S3PAs released",
      async () => !(await this.mountpointPods()).length && !(await this.s3pas()).length,
      { timeoutMs, intervalMs: 250 },
    );
  }

  /** FUSE mounts (sources and bind mounts) under the sandbox's state dir. */
  async fuseMounts(): Promise<MountInfo[]> {
    return (await readMountInfo()).filter((m) =>
      m.mountPoint.startsWith(`${this.dir}/`) && m.fsType.startsWith("fuse")
    );
  }

  /** The sandbox's own long-running processes (node plugins, controller). */
  driverPids(): Set<number> {
    const pids = new Set(this.env.nodes.map((n) => n.plugin.pid));
    if (this.env.controller) pids.add(this.env.controller.pid);
    return pids;
  }

  /** Processes naming the state dir other than the driver's own (mounters, engines, workloads). */
  async strayProcesses(): Promise<string[]> {
    const mine = this.driverPids();
    return [...(await processesUsing(this.dir))].filter(([pid]) => !mine.has(pid)).map((
      [pid, cmd],
    ) => `${pid} ${cmd.slice(0, 160)}`);
  }
}

/** Everything found under `root` (recursively) matching `pred`. */
export async function findFiles(
  root: string,
  pred: (path: string, info: Deno.FileInfo) => boolean,
): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(dir));
    } catch {
      return;
    }
    for (const e of entries) {
      const p = `${dir}/${e.name}`;
      const info = await Deno.lstat(p).catch(() => undefined);
      if (!info) continue;
      if (pred(p, info)) out.push(p);
      if (info.isDirectory) await walk(p);
    }
  };
  await walk(root);
  return out;
}

/**
 * Run `fn` against a fresh sandbox (RGW, `nodes` nodes, controller with the Controller service,
 * provisioner emulation); tear everything down afterwards and fail on leftovers.
 */
export async function withSandbox(
  opts: { nodes?: number; name: string },
  fn: (e: E2E) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-e2e-" });
  await Deno.chmod(dir, 0o755);
  const stop = new AbortController();
  const out: string[] = [];
  const env = new SandboxEnv(
    { dir, nodes: opts.nodes ?? 1, s3: "rgw", signal: stop.signal, withoutController: true },
    new StepReporter((t) => out.push(t)),
  );
  const e = new E2E(env, dir);
  const t0 = performance.now();
  let failure: unknown;
  try {
    assert.ok(await env.start(), `sandbox did not start:\n${out.join("")}`);
    await startController(e);
    report(`${opts.name}: sandbox up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await fn(e);
  } catch (err) {
    failure = err;
  }
  const leaks: string[] = [];
  try {
    await e.provisioner?.stop();
    await env.drain().catch(() => {});
    // Every Mountpoint Pod must be released once its workloads are gone — also after a failed
    // mount (the mounter exits when the node plugin writes mount.exit). Stopping the controller
    // and kubelets mid-release would also leave their source mounts.
    if (env.client && env.controller?.exitCode === undefined) {
      await e.waitReleased(45_000).catch(async (err) => {
        const left = (await e.mountpointPods().catch(() => [])).map((p) =>
          `${p.metadata.name} (${p.status?.phase ?? "?"})`
        );
        leaks.push(
          `release: ${errorMessage(err)}; Mountpoint Pods still there: ${left.join(", ")}`,
        );
      });
    }
    await env.stop().catch((err) => leaks.push(`stop: ${errorMessage(err)}`));
    stop.abort();
    const crashes = env.crashes();
    if (crashes.length) {
      leaks.push(
        `${crashes.length} driver process crash(es) (each node plugin crash was followed by a restart):\n${
          describeCrashes(crashes)
        }`,
      );
    }
    const left = await leftoversOf(dir);
    if (left) leaks.push(`left after teardown: ${left}`);
    await cleanUpLeftovers(dir);
  } finally {
    if (!failure && !leaks.length) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    } else {
      report(`${opts.name}: state and logs kept in ${dir}`);
    }
  }
  report(`${opts.name}: whole file ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  if (failure && leaks.length) {
    throw new Error(`${errorMessage(failure)}\nand at teardown: ${leaks.join("\n")}`, {
      cause: failure,
    });
  }
  if (failure) throw failure;
  if (leaks.length) throw new Error(`teardown found: ${leaks.join("\n")}`);
}

function freePort(): number {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (probe.addr as Deno.NetAddr).port;
  probe.close();
  return port;
}

/**
 * One sandbox at a time per machine: `deno test --parallel` runs test files as workers of one
 * process, and the sandbox's RGW state dir is keyed by the process id, so two sandboxes of one
 * process would share (and purge) one RGW cluster.
 */
async function exclusive<T>(fn: () => Promise<T>): Promise<T> {
  const lock = await Deno.open(LOCK_PATH, { create: true, write: true });
  try {
    await lock.lock(true);
    return await fn();
  } finally {
    await lock.unlock().catch(() => {});
    lock.close();
  }
}

const LOCK_PATH = "/tmp/s3csi-e2e-sandbox.lock";

async function startController(e: E2E): Promise<void> {
  const { env, dir } = e;
  const s3 = env.s3!.env;
  const socket = `${dir}/controller/csi.sock`;
  await Deno.mkdir(`${dir}/controller`, { recursive: true });
  env.controller = await ChildProcess.binary("controller", [], {
    KUBECONFIG: `${dir}/kubeconfig`,
    CSI_ENDPOINT: `unix://${socket}`,
    MOUNTPOINT_NAMESPACE: DEFAULT_MOUNTPOINT_NAMESPACE,
    MOUNTPOINT_IMAGE: "s3-csi-mounter:sandbox",
    LOG_FORMAT: "text",
    METRICS_ADDRESS: `127.0.0.1:${freePort()}`,
    AWS_ENDPOINT_URL: s3.S3_ENDPOINT,
    AWS_REGION: s3.AWS_REGION,
    AWS_ACCESS_KEY_ID: s3.AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: s3.AWS_SECRET_ACCESS_KEY,
  }, `${env.logDir}/controller.log`);
  const c = env.client!;
  e.provisioner = new Provisioner({
    client: c,
    socketPath: socket,
    events: new ApiEventRecorder(c, "csi-provisioner", "e2e"),
    retryStartMs: 500,
    retryMaxMs: 3000,
  });
  const controller = env.controller;
  let started = false;
  const exited = controller.status.then(async (code) => {
    if (started) return;
    const log = await Deno.readTextFile(controller.logPath).catch(() => "");
    throw new Error(`controller exited with ${code}: ${log.split("\n").slice(-15).join("\n")}`);
  });
  exited.catch(() => {});
  await Promise.race([e.provisioner.start(60_000), exited]);
  started = true;
}

/** Print one line to stderr (collected in the tier's report). */
export function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`E2E ${line}\n`));
}

/**
 * Declare a file's test: skipped (with the reason printed) where the tier cannot run, or for
 * `skip` (a further need of this file, e.g. the suite's kubectl).
 */
export function e2eTest(
  name: string,
  nodes: number,
  fn: (e: E2E, t: Deno.TestContext) => Promise<void>,
  skip?: string,
): void {
  const reason = e2eSkipReason() ?? skip;
  if (reason) report(`SKIP ${name}: ${reason}`);
  Deno.test({
    name: reason ? `${name} (skipped: ${reason})` : name,
    ignore: reason !== undefined,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      await exclusive(() => withSandbox({ nodes, name }, (e) => fn(e, t)));
    },
  });
}
