/**
 * The sandbox's running parts and their teardown: the API server (the emulator in process, or the
 * real kube-apiserver tier with `--real-apiserver`), the scheduler and — on the emulator — the
 * volume binder (in process), an S3 server, and per emulated node a node plugin process plus a
 * kubelet emulator; the controller process (Controller service on its CSI socket) and the
 * csi-provisioner emulation. Each start is one reported step.
 *
 * @module
 */
import { S3Client } from "@aws-sdk/client-s3";
import { renderManifests } from "../../../src/deploy/render.ts";
import { resourceOf } from "../../../src/deploy/kinds.ts";
import { defaultValues } from "../../../src/deploy/values.ts";
import { type ApiServer, startApiServer } from "../apiserver/api_server.ts";
import type { KubeClient, KubeObject } from "../../../src/kube/client.ts";
import { AlreadyExistsError } from "../../../src/kube/errors.ts";
import { ApiEventRecorder } from "../../../src/kube/event_recorder.ts";
import { kubeConfigFromFile } from "../../../src/kube/kube_config.ts";
import {
  CRDS,
  NAMESPACES,
  NODES,
  PODS,
  PVCS,
  PVS,
  type Resource,
  SERVICE_ACCOUNTS,
} from "../../../src/kube/resources.ts";
import { RestKubeClient } from "../../../src/kube/rest_client.ts";
import { Kubelet } from "../kubelet/kubelet.ts";
import type { Pod } from "../kubelet/k8s_types.ts";
import { Scheduler } from "../control_plane/scheduler.ts";
import { VolumeBinder } from "../control_plane/volume_binder.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../../../src/mppod/labels.ts";
import { pluginDir } from "../../../src/mppod/paths.ts";
import { Provisioner } from "../csi_provisioner/provisioner.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { ChildProcess, type Crash, SupervisedProcess } from "./child_process.ts";
import { type RealTier, startRealTier } from "./kube_real.ts";
import { RealNodeParts } from "./real_node_parts.ts";
import { type S3Choice, type S3Server, startS3Server } from "./s3_server.ts";
import type { Engine } from "../../../src/mppod/mount_message.ts";
import { findEngineBin, prepareMounterImage, withEngine } from "../kubelet/mounter_image.ts";
import type { StepReporter } from "./step_reporter.ts";
import { waitFor } from "../../../src/util/wait_for.ts";
import { CSI_NODES } from "../../../src/kube/resources.ts";

/** Kinds of the rendered deployment the sandbox applies (besides the Mountpoint namespace). */
/** The Mountpoint image the sandbox's controller renders (the kubelet emulator runs any). */
const SANDBOX_MOUNTPOINT_IMAGE = "s3-csi-mounter:sandbox";

const CLUSTER_KINDS: ReadonlySet<string> = new Set([
  "CustomResourceDefinition",
  "PriorityClass",
  "CSIDriver",
]);

/** One emulated node. */
export interface SandboxNode {
  readonly name: string;
  readonly root: string;
  readonly socket: string;
  readonly plugin: SupervisedProcess;
  readonly kubelet: Kubelet;
}

/** Settings of {@link SandboxEnv}. */
export interface SandboxEnvOptions {
  readonly dir: string;
  readonly nodes: number;
  readonly s3: S3Choice;
  /**
   * Engine of the volumes (the node plugins' `--default-engine`). `auto` (default): mount-s3 on
   * versitygw when it is built, else rclone (Mountpoint's writes fail on RGW 16.2).
   */
  readonly engine?: "auto" | Engine;
  readonly signal: AbortSignal;
  /** Do not start the controller (nor, then, the csi-provisioner emulation). */
  readonly withoutController?: boolean;
  /**
   * Use the real kube-apiserver tier (`tests/testbed/services/kube_real/`) instead of the API emulator. Names are
   * then unique per run (namespaces, nodes, PVs) and everything created is deleted at the end.
   */
  readonly realApiserver?: boolean;
  /**
   * Run on the real single-node cluster (`tests/testbed/services/real_node/`): the driver deployed
   * with `deno task deploy` instead of processes and emulators.
   */
  readonly realNode?: boolean;
  /** With `realNode`: nodes to run (2 starts the second node of `worker.sh`). @default 1 */
  readonly realNodes?: number;
  /** Bound of every wait (CRD established, driver registration, controller ready, drain). */
  readonly timeoutMs?: number;
}

/** Default bound of a sandbox wait. */
export const DEFAULT_WAIT_MS = 120_000;

/** Create `obj` unless it exists; true when created here. */
async function ensure(c: KubeClient, r: Resource, obj: KubeObject): Promise<boolean> {
  try {
    await c.create(r, obj);
    return true;
  } catch (err) {
    if (err instanceof AlreadyExistsError) return false;
    throw err;
  }
}

/** Everything the sandbox started, for the scenario and teardown. */
export class SandboxEnv {
  readonly #o: SandboxEnvOptions;
  readonly #r: StepReporter;
  readonly #log = logger("sandbox", "env");
  /** Short id of this run: unique names on a shared (real) API server. */
  readonly runId: string = crypto.randomUUID().slice(0, 8);
  /** Namespace of the scenario's workloads. */
  readonly namespace: string;
  /** Namespace of the Mountpoint Pods. */
  readonly mpNamespace: string;
  api: ApiServer | undefined;
  tier: RealTier | undefined;
  client: KubeClient | undefined;
  s3: S3Server | undefined;
  s3Client: S3Client | undefined;
  /** The volumes' engine, and our mount-s3 binary when that is it (decided with the S3 server). */
  engine: Engine = "rclone";
  engineBin: string | undefined;
  scheduler: Scheduler | undefined;
  binder: VolumeBinder | undefined;
  controller: ChildProcess | undefined;
  provisioner: Provisioner | undefined;
  readonly nodes: SandboxNode[] = [];
  /** The real node and the driver deployed on it (`realNode`). */
  realNode: RealNodeParts | undefined;
  /** Cluster-scoped objects the run created and deletes at the end on the real tier. */
  readonly created: { resource: Resource; name: string }[] = [];

  /** Create; {@link start} does the work. */
  constructor(options: SandboxEnvOptions, reporter: StepReporter) {
    this.#o = options;
    this.#r = reporter;
    this.namespace = options.realApiserver || options.realNode
      ? `sandbox-${this.runId}`
      : "default";
    // On the real node the driver is deployed with its default values: Mountpoint Pods in mount-s3.
    this.mpNamespace = options.realApiserver
      ? `mount-s3-${this.runId}`
      : DEFAULT_MOUNTPOINT_NAMESPACE;
  }

  /** Bound of every wait. */
  get timeoutMs(): number {
    return this.#o.timeoutMs ?? DEFAULT_WAIT_MS;
  }

  /**
   * Every exit of a driver process nobody asked for so far: node plugin crashes (each followed by
   * a restart, as kubelet restarts a DaemonSet container) and a controller that died.
   */
  crashes(): Crash[] {
    const out = this.nodes.flatMap((n) => n.plugin.crashes);
    if (this.controller?.crash) out.push(this.controller.crash);
    return out;
  }

  /** Log directory. */
  get logDir(): string {
    return `${this.#o.dir}/logs`;
  }

  /** True on the real kube-apiserver tier. */
  get real(): boolean {
    return this.#o.realApiserver === true;
  }

  /** True when something serves the CSI Controller service to a csi-provisioner. */
  get provisions(): boolean {
    return this.provisioner !== undefined || this.realNode?.driver !== undefined;
  }

  /** Image (and pull policy) of the scenario's workloads. */
  get workloadImage(): { image: string; imagePullPolicy?: string } {
    const node = this.realNode?.node;
    return node
      ? { image: `${node.imagePrefix}/busybox:host`, imagePullPolicy: "Never" }
      : { image: "busybox" };
  }

  /** Output of a workload container (the kubelet emulators' or the real kubelet's log files). */
  async readLog(pod: Pod, container: string): Promise<string> {
    if (this.realNode) return await this.realNode.log(pod, container);
    for (const n of this.nodes) {
      const path = n.kubelet.containerLogPath(pod.metadata.uid, container) ??
        `${n.root}/pod-logs/${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}/${container}/0.log`;
      const text = await Deno.readTextFile(path).catch(() => undefined);
      if (text !== undefined) return text;
    }
    return "";
  }

  /** The kubeconfig every part uses (a copy of the real tier's, or the emulator's). */
  get kubeconfig(): string {
    return `${this.#o.dir}/kubeconfig`;
  }

  /** Name of emulated node `i` (1-based); unique per run on the real tier. */
  nodeName(i: number): string {
    return this.real ? `node-${i}-${this.runId}` : `node-${i}`;
  }

  /** A name unique per run on the real tier, `base` on the emulator. */
  unique(base: string): string {
    return this.real ? `${base}-${this.runId}` : base;
  }

  /** Start everything; resolves false when a required part failed. */
  async start(): Promise<boolean> {
    const r = this.#r;
    const dir = this.#o.dir;
    await Deno.mkdir(this.logDir, { recursive: true });
    if (this.#o.realNode) return await this.#startOnRealNode();
    const api = this.real
      ? await r.step(
        "Real kube-apiserver tier (etcd, kube-apiserver, kube-controller-manager)",
        async () => {
          this.tier = await startRealTier(`${this.logDir}/kube-real.log`, this.#o.signal);
          await Deno.copyFile(this.tier.kubeconfig, this.kubeconfig);
          await Deno.chmod(this.kubeconfig, 0o600);
          this.client = new RestKubeClient(kubeConfigFromFile(this.kubeconfig), {
            userAgent: "s3csi-sandbox",
          });
          const server = kubeConfigFromFile(this.kubeconfig).server;
          return `${server} (${this.tier.startedHere ? "started" : "already running, reused"})`;
        },
        (d) => d,
      )
      : await r.step("API emulator (in process)", async () => {
        this.api = await startApiServer({ port: 0, kubeconfigPath: this.kubeconfig });
        this.client = new RestKubeClient(kubeConfigFromFile(this.kubeconfig), {
          userAgent: "s3csi-sandbox",
        });
        return this.api.url;
      }, (url) => url);
    if (!api || !this.client) return false;
    const c = this.client;
    const objects = await r.step("CRD, namespaces, PriorityClass, CSIDriver applied", async () => {
      // The cluster-level objects exactly as `deno task deploy` renders them (the sandbox runs the
      // node plugin and controller as processes, so their workloads and RBAC are not applied).
      const values = defaultValues();
      values.mountpointPod.namespace = this.mpNamespace;
      const rendered = renderManifests(values).filter((m) =>
        CLUSTER_KINDS.has(m.kind) ||
        (m.kind === "Namespace" && m.metadata.name === this.mpNamespace)
      );
      let driver = false;
      for (const m of rendered) {
        const created = await ensure(c, resourceOf(m), m as KubeObject);
        if (m.kind === "CSIDriver") driver = created;
      }
      if (this.namespace !== this.mpNamespace) {
        await ensure(c, NAMESPACES, { metadata: { name: this.namespace } });
      }
      const crd = rendered.find((m) => m.kind === "CustomResourceDefinition")!;
      await waitFor("the S3PA CRD to be Established", async () => {
        const got = await c.get<
          { status?: { conditions?: { type: string; status: string }[] } } & KubeObject
        >(CRDS, crd.metadata!.name!);
        return got?.status?.conditions?.some((x) =>
          x.type === "Established" && x.status === "True"
        ) ?? false;
      }, { timeoutMs: this.timeoutMs, intervalMs: 100 });
      if (this.real) {
        // The ServiceAccount admission rejects pods until KCM made the namespace's "default" SA.
        for (const ns of [this.mpNamespace, this.namespace]) {
          await waitFor(
            `ServiceAccount ${ns}/default`,
            async () => !!(await c.get(SERVICE_ACCOUNTS, "default", ns)),
            { timeoutMs: this.timeoutMs, intervalMs: 100 },
          );
        }
      }
      return `workloads in ${this.namespace}, Mountpoint Pods in ${this.mpNamespace}${
        driver ? "" : " (CSIDriver already there)"
      }`;
    }, (d) => d);
    if (objects === undefined) return false;
    const control = await r.step(
      this.real
        ? "Scheduler (emulated, pods/binding); PV binder: kube-controller-manager's"
        : "Scheduler and PV binder (emulated)",
      async () => {
        this.scheduler = new Scheduler(c, {
          bind: this.real ? "binding" : "patch",
          ...(this.real ? { namespaces: [this.namespace, this.mpNamespace] } : {}),
        });
        await this.scheduler.start();
        if (this.real) return "";
        this.binder = new VolumeBinder({
          client: c,
          resyncMs: 2000,
          events: new ApiEventRecorder(c, "persistentvolume-controller", "sandbox"),
        });
        await this.binder.start();
        return "";
      },
    );
    if (control === undefined) return false;
    if (!(await this.#startS3())) return false;
    for (let i = 1; i <= this.#o.nodes; i++) {
      const name = this.nodeName(i);
      const ok = await r.step(
        `Node ${name}: node plugin process + kubelet emulator, driver registered`,
        () => this.#startNode(name),
        (n) => `socket ${n.socket}`,
      );
      if (!ok) return false;
    }
    if (this.#o.withoutController) {
      r.report("Controller process", "info", "not started (--without-controller)");
      return true;
    }
    const socket = `${dir}/controller/csi.sock`;
    const controller = await r.step(
      "Controller process (with the CSI Controller service)",
      async () => {
        await Deno.mkdir(`${dir}/controller`, { recursive: true });
        const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const metrics = `127.0.0.1:${(probe.addr as Deno.NetAddr).port}`;
        probe.close();
        const e = this.s3!.env;
        this.controller = await ChildProcess.binary("controller", [], {
          KUBECONFIG: this.kubeconfig,
          CSI_ENDPOINT: `unix://${socket}`,
          MOUNTPOINT_NAMESPACE: this.mpNamespace,
          MOUNTPOINT_IMAGE: SANDBOX_MOUNTPOINT_IMAGE,
          METRICS_ADDRESS: metrics,
          LOG_FORMAT: "text",
          AWS_ENDPOINT_URL: e.S3_ENDPOINT,
          AWS_REGION: e.AWS_REGION,
          AWS_ACCESS_KEY_ID: e.AWS_ACCESS_KEY_ID,
          AWS_SECRET_ACCESS_KEY: e.AWS_SECRET_ACCESS_KEY,
        }, `${this.logDir}/controller.log`);
        const proc = this.controller;
        await waitFor("the controller to answer /readyz and serve its CSI socket", async () => {
          if (proc.exitCode !== undefined) {
            throw new Error(`the controller exited with ${proc.exitCode} (log ${proc.logPath})`);
          }
          const ready = await fetch(`http://${metrics}/readyz`).then(
            async (res) => (await res.body?.cancel(), res.ok),
            () => false,
          );
          return ready && (await Deno.stat(socket).then((s) => s.isSocket, () => false));
        }, { timeoutMs: this.timeoutMs, intervalMs: 100 });
        return `pid ${proc.pid}, CSI unix://${socket}, metrics http://${metrics}/metrics`;
      },
      (d) => d,
    );
    // The controller step failed (✗): the scenario still runs, and the steps that need the
    // controller (attachment, provisioning) fail naming it.
    if (controller === undefined) return true;
    await r.step("csi-provisioner (emulated) connected to the Controller service", async () => {
      const p = new Provisioner({
        client: c,
        socketPath: socket,
        events: new ApiEventRecorder(c, "csi-provisioner", "sandbox"),
        retryStartMs: 500,
        retryMaxMs: 5000,
      });
      const proc = this.controller!;
      const exited = proc.status.then((code) => {
        throw new Error(`the controller exited with ${code} (log ${proc.logPath})`);
      });
      exited.catch(() => {}); // raced below only
      await Promise.race([p.start(this.timeoutMs), exited]);
      this.provisioner = p;
      return "";
    });
    return true;
  }

  /** The volumes' engine for this S3 server (see {@link SandboxEnvOptions.engine}). */
  #chooseEngine(s3: S3Server): void {
    // The Mountpoint image always carries the build's dir: the mounter execs s3-csi-supervisor
    // from there, whichever engine the volumes use.
    const found = findEngineBin();
    if ("reason" in found) {
      throw new Error(
        `the Mountpoint image needs mount-s3 and s3-csi-supervisor (scripts/build_engine.sh): ${found.reason}`,
      );
    }
    this.engineBin = found.bin;
    const wanted = this.#o.engine ?? "auto";
    if (wanted === "mount-s3" || (wanted === "auto" && s3.kind === "versitygw")) {
      this.engine = "mount-s3";
    }
  }

  async #startS3(choice: S3Choice = this.#o.s3): Promise<S3Server | undefined> {
    return await this.#r.step(
      "S3 server",
      async () => {
        this.s3 = await startS3Server(choice, this.#o.dir, this.logDir, this.#o.signal);
        const e = this.s3.env;
        this.s3Client = new S3Client({
          endpoint: e.S3_ENDPOINT,
          region: e.AWS_REGION,
          forcePathStyle: true,
          credentials: {
            accessKeyId: e.AWS_ACCESS_KEY_ID,
            secretAccessKey: e.AWS_SECRET_ACCESS_KEY,
          },
          requestChecksumCalculation: "WHEN_REQUIRED",
          responseChecksumValidation: "WHEN_REQUIRED",
        });
        // On the real node the engine is the Mountpoint image's (RealNodeParts.findEngine).
        if (!this.realNode) this.#chooseEngine(this.s3);
        return this.s3;
      },
      (s) =>
        `${s.kind} at ${s.env.S3_ENDPOINT}${s.note ? ` (${s.note})` : ""}${
          this.realNode
            ? ""
            : `; volumes on ${this.engine}${this.engineBin ? ` (${this.engineBin})` : ""}`
        }`,
    );
  }

  /** The real node, S3 for its pods, the driver deployed on it, the scenario's namespace. */
  async #startOnRealNode(): Promise<boolean> {
    const r = this.#r;
    const parts = this.realNode = new RealNodeParts(r, this.logDir, this.#o.signal);
    const node = await parts.startNode();
    if (!node) return false;
    await Deno.copyFile(node.kubeconfig, this.kubeconfig);
    await Deno.chmod(this.kubeconfig, 0o600);
    this.client = new RestKubeClient(kubeConfigFromFile(this.kubeconfig), {
      userAgent: "s3csi-sandbox",
    });
    const c = this.client;
    if (!(await parts.findEngine())) return false;
    // mount-s3's uploads need versitygw (Ceph RGW 16 refuses them): `auto` picks it then.
    const s3 = this.#o.s3 === "auto" ? (parts.engine ? "versitygw" : "rgw") : this.#o.s3;
    if (!(await this.#startS3(s3))) return false;
    if (!(await parts.deploy(this.s3!))) return false;
    const registered = await r.step(
      "Driver registered with the kubelet (CSINode lists it)",
      () => parts.registered(c),
      (n) => `node ${n}`,
    );
    if (registered === undefined) return false;
    if ((this.#o.realNodes ?? 1) > 1 && !(await parts.startWorker(c))) return false;
    const ns = await r.step("Namespace of the scenario's workloads", async () => {
      await ensure(c, NAMESPACES, { metadata: { name: this.namespace } });
      await waitFor(
        `ServiceAccount ${this.namespace}/default`,
        async () => !!(await c.get(SERVICE_ACCOUNTS, "default", this.namespace)),
        { timeoutMs: this.timeoutMs, intervalMs: 100 },
      );
      return this.namespace;
    }, (n) => n);
    return ns !== undefined;
  }

  async #startNode(name: string): Promise<SandboxNode> {
    const root = `${this.#o.dir}/${name}/kubelet`;
    await Deno.mkdir(root, { recursive: true });
    const socket = `${pluginDir(root)}/csi.sock`;
    const e = this.s3!.env;
    // Supervised like a DaemonSet container: a crashed node plugin is restarted, and it adopts the
    // live mounts of its node when it starts again.
    const plugin = await SupervisedProcess.start(() =>
      ChildProcess.binary(
        "node",
        [
          "--endpoint",
          `unix://${socket}`,
          "--kubelet-path",
          root,
          "--shutdown-grace",
          "3s",
        ],
        {
          KUBECONFIG: this.kubeconfig,
          CSI_NODE_NAME: name,
          MOUNTPOINT_NAMESPACE: this.mpNamespace,
          // The node plugin checks that Mountpoint Pods have the controller's image.
          MOUNTPOINT_IMAGE: SANDBOX_MOUNTPOINT_IMAGE,
          AWS_ACCESS_KEY_ID: e.AWS_ACCESS_KEY_ID,
          AWS_SECRET_ACCESS_KEY: e.AWS_SECRET_ACCESS_KEY,
          AWS_REGION: e.AWS_REGION,
          AWS_ENDPOINT_URL: e.S3_ENDPOINT,
          S3_ENDPOINT_URL: e.S3_ENDPOINT,
          DEFAULT_ENGINE: this.engine,
          LOG_FORMAT: "text",
        },
        `${this.logDir}/node-plugin-${name}.log`,
        `node plugin ${name}`,
      )
    );
    const image = await prepareMounterImage(root);
    const kubelet = new Kubelet({
      client: this.client!,
      nodeName: name,
      kubeletRoot: root,
      driverSocket: socket,
      restartBackoff: { initialMs: 2000, maxMs: 20_000 },
      // The Mountpoint image carries our mount-s3 and the supervisor.
      mountpointImage: this.engineBin ? withEngine(image, this.engineBin) : image,
    });
    const node = { name, root, socket, plugin, kubelet };
    this.nodes.push(node);
    // `kubectl logs` through the API emulator reads this kubelet's container logs.
    this.api?.podLogs.register(name, kubelet);
    await kubelet.start();
    await waitFor("driver registration (NodeGetInfo)", () => {
      if (plugin.exitCode !== undefined) {
        throw new Error(`node plugin exited with ${plugin.exitCode} (log ${plugin.logPath})`);
      }
      return kubelet.driverRegistered;
    }, { timeoutMs: this.timeoutMs, intervalMs: 100 });
    if (this.real) await this.#untaintNode(name);
    return node;
  }

  /**
   * The real API server's TaintNodesByCondition admission taints a new node
   * `node.kubernetes.io/not-ready:NoSchedule`; kube-controller-manager's node lifecycle controller,
   * which is not run in the tier (it needs real kubelets), would lift it once the node is Ready.
   * Do its job for our Ready node.
   */
  async #untaintNode(name: string): Promise<void> {
    const c = this.client!;
    await waitFor(`node ${name} without the not-ready taint`, async () => {
      const node = await c.get<{ spec?: { taints?: { key: string }[] } } & KubeObject>(NODES, name);
      const taints = node?.spec?.taints ?? [];
      const kept = taints.filter((t) => !t.key.startsWith("node.kubernetes.io/not-ready"));
      if (kept.length === taints.length) return true;
      await c.patch(NODES, name, undefined, {
        metadata: { resourceVersion: node!.metadata!.resourceVersion },
        spec: { taints: kept },
      }).catch(() => undefined); // a conflict: retried
      return false;
    }, { timeoutMs: this.timeoutMs, intervalMs: 100 });
  }

  /**
   * Delete the remaining workload pods of the sandbox's namespace through the API (the normal
   * unpublish path), then give the controller time to release the Mountpoint Pods. Reported only
   * when there was something.
   */
  async drain(): Promise<void> {
    const c = this.client;
    if (!c) return;
    const ns = this.namespace;
    const workloads = (await c.list<Pod>(PODS, { namespace: ns }).catch(() => ({
      items: [] as Pod[],
    }))).items;
    const t0 = performance.now();
    const title = "Remaining pods deleted through the API (unpublish, then release)";
    try {
      for (const p of workloads) {
        await c.delete(PODS, p.metadata.name, p.metadata.namespace).catch(() => false);
      }
      if (workloads.length) {
        await waitFor(
          "the workload pods to go",
          async () => !(await c.list<Pod>(PODS, { namespace: ns })).items.length,
          { timeoutMs: this.timeoutMs, intervalMs: 100 },
        );
      }
      // Even with no workload left, Mountpoint Pods may still be releasing (needs-unmount →
      // unmount → Succeeded): stopping the controller and kubelets now would leave mounts.
      if ((this.controller && this.controller.exitCode === undefined) || this.realNode?.driver) {
        await waitFor(
          "the Mountpoint Pods to go",
          async () => !(await c.list(PODS, { namespace: this.mpNamespace })).items.length,
          { timeoutMs: this.timeoutMs, intervalMs: 100 },
        );
      }
      this.#r.report(title, "ok", `${workloads.length} pod(s)`, performance.now() - t0);
    } catch (err) {
      // Not a failure by itself: the kubelets' shutdown below stops and unpublishes what is left,
      // and the final check says whether anything leaked.
      this.#r.report(
        title,
        "info",
        `${errorMessage(err)}; left to the kubelets' shutdown`,
        performance.now() - t0,
      );
    }
  }

  /** Stop everything in dependency order; each part bounded. */
  async stop(): Promise<void> {
    const r = this.#r;
    if (this.realNode) {
      const c = this.client;
      if (c) {
        await c.delete(NAMESPACES, this.namespace).catch(() => false);
        for (const x of this.created) await c.delete(x.resource, x.name).catch(() => false);
      }
      // Close our API connections before the API server goes: a server going away under an open
      // pooled connection can crash Deno's HTTP/2 client (nghttp2 assertion on GOAWAY).
      await Promise.race([
        (c as RestKubeClient | undefined)?.close(),
        new Promise((res) => setTimeout(res, 5000)),
      ]).catch(() => {});
      this.client = undefined;
      await this.realNode.stop();
      if (this.s3) {
        const s3 = this.s3;
        await r.step("S3 server stopped", () => s3.stop().then(() => s3.kind), (k) => k);
      }
      this.s3Client?.destroy();
      return;
    }
    await this.provisioner?.stop();
    if (this.controller) {
      await r.step("Controller stopped", () => this.controller!.stop(10_000), (c) => `exit ${c}`);
    }
    if (this.nodes.length) {
      await r.step("Kubelets stopped (containers killed, volumes unpublished)", async () => {
        await Promise.all(this.nodes.map((n) => n.kubelet.stop(30_000)));
        return this.nodes.length;
      }, (n) => `${n} node(s)`);
      await r.step("Node plugins stopped", async () => {
        const codes = await Promise.all(this.nodes.map((n) => n.plugin.stop(15_000)));
        return codes.join(", ");
      }, (codes) => `exit ${codes}`);
    }
    await this.scheduler?.stop();
    await this.binder?.stop();
    if (this.s3) {
      const s3 = this.s3;
      await r.step("S3 server stopped", () => s3.stop().then(() => s3.kind), (k) => k);
    }
    if (this.tier) {
      await r.step("Real tier: the run's namespaces, nodes and PVs deleted", () => this.#cleanUp());
      const tier = this.tier;
      // Close our API connections first: a server going away under an open pooled connection
      // can crash Deno's HTTP/2 client (nghttp2 assertion on GOAWAY).
      await Promise.race([
        (this.client as RestKubeClient | undefined)?.close(),
        new Promise((res) => setTimeout(res, 5000)),
      ]).catch(() => {});
      this.client = undefined;
      await r.step("Real tier", () => tier.stop(), (d) => d);
    }
    await this.api?.stop();
    this.s3Client?.destroy();
  }

  /** Delete what this run created on a shared API server; bounded. */
  async #cleanUp(): Promise<string> {
    const c = this.client!;
    let n = 0;
    // Pods still bound to a node (kubelet gone) would hold their namespace's deletion forever.
    for (const ns of [this.namespace, this.mpNamespace]) {
      for (const p of (await c.list<Pod>(PODS, { namespace: ns })).items) {
        await c.delete(PODS, p.metadata.name, ns, { gracePeriodSeconds: 0 }).catch(() => false);
      }
      for (const pvc of (await c.list(PVCS, { namespace: ns })).items) {
        await c.delete(PVCS, pvc.metadata!.name!, ns).catch(() => false);
      }
    }
    const pvs = (await c.list<{ spec?: { claimRef?: { namespace?: string } } } & KubeObject>(PVS))
      .items.filter((pv) =>
        pv.spec?.claimRef?.namespace === this.namespace ||
        this.created.some((x) => x.resource === PVS && x.name === pv.metadata?.name)
      );
    for (const pv of pvs) {
      // A Retain PV whose claim is gone keeps the protection finalizer only while it is used.
      if (await c.delete(PVS, pv.metadata!.name!).catch(() => false)) n++;
    }
    for (const x of this.created.filter((x) => x.resource !== PVS)) {
      if (await c.delete(x.resource, x.name).catch(() => false)) n++;
    }
    for (const node of this.nodes) {
      if (await c.delete(CSI_NODES, node.name).catch(() => false)) n++;
      if (await c.delete(NODES, node.name).catch(() => false)) n++;
    }
    for (const ns of [this.namespace, this.mpNamespace]) {
      if (await c.delete(NAMESPACES, ns).catch(() => false)) n++;
    }
    // Namespace deletion is asynchronous (KCM's namespace controller); wait a little, no more.
    const gone = await waitFor(
      "the namespaces to go",
      async () =>
        !(await c.get(NAMESPACES, this.namespace)) && !(await c.get(NAMESPACES, this.mpNamespace)),
      { timeoutMs: 30_000, intervalMs: 100 },
    ).then(() => true, (err) => {
      this.#log.warn("Namespaces still there: {error}", { error: errorMessage(err) });
      return false;
    });
    return `${n} object(s) deleted${gone ? "" : " (namespaces still terminating)"}`;
  }
}
