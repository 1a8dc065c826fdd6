/**
 * The sandbox's running parts and their teardown: the API emulator (in process), scheduler and
 * volume binder (in process), an S3 server, and per emulated node a node plugin process plus a
 * kubelet emulator; the controller process. Each start is one reported step.
 *
 * @module
 */
import { S3Client } from "@aws-sdk/client-s3";
import { KubeConfig } from "@kubernetes/client-node";
import { s3paCrd } from "../api/mountpoint_s3_pod_attachment.ts";
import { type ApiServer, startApiServer } from "../apiserver/api_server.ts";
import type { KubeClient } from "../kube/client.ts";
import { NAMESPACES, PODS, type Resource } from "../kube/resources.ts";
import { RestKubeClient } from "../kube/rest_client.ts";
import { Kubelet } from "../kubelet/kubelet.ts";
import type { Pod } from "../kubelet/k8s_types.ts";
import { CSI_DRIVERS } from "../kubelet/kubelet_resources.ts";
import { Scheduler } from "../kubelet/scheduler.ts";
import { VolumeBinder } from "../kubelet/volume_binder.ts";
import { EventRecorder } from "../kubelet/event_recorder.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../mppod/labels.ts";
import { pluginDir } from "../mppod/paths.ts";
import { DRIVER_NAME } from "../util/version.ts";
import { ChildProcess } from "./child_process.ts";
import { type S3Choice, type S3Server, startS3Server } from "./s3_server.ts";
import type { StepReporter } from "./step_reporter.ts";

const PRIORITY_CLASSES: Resource = {
  group: "scheduling.k8s.io",
  version: "v1",
  plural: "priorityclasses",
  kind: "PriorityClass",
  namespaced: false,
};

/** PriorityClass of Mountpoint Pods, as the deployment manifests create it (controller default). */
export const MOUNTPOINT_PRIORITY_CLASS = "mount-s3-critical";

const CRDS: Resource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
};

/** One emulated node. */
export interface SandboxNode {
  readonly name: string;
  readonly root: string;
  readonly socket: string;
  readonly plugin: ChildProcess;
  readonly kubelet: Kubelet;
}

/** Settings of {@link SandboxEnv}. */
export interface SandboxEnvOptions {
  readonly dir: string;
  readonly nodes: number;
  readonly s3: S3Choice;
  readonly signal: AbortSignal;
  /** Do not start the controller. */
  readonly withoutController?: boolean;
}

async function waitUntil(what: string, check: () => Promise<boolean> | boolean, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Everything the sandbox started, for the scenario and teardown. */
export class SandboxEnv {
  readonly #o: SandboxEnvOptions;
  readonly #r: StepReporter;
  api: ApiServer | undefined;
  client: KubeClient | undefined;
  s3: S3Server | undefined;
  s3Client: S3Client | undefined;
  scheduler: Scheduler | undefined;
  binder: VolumeBinder | undefined;
  controller: ChildProcess | undefined;
  readonly nodes: SandboxNode[] = [];

  /** Create; {@link start} does the work. */
  constructor(options: SandboxEnvOptions, reporter: StepReporter) {
    this.#o = options;
    this.#r = reporter;
  }

  /** Log directory. */
  get logDir(): string {
    return `${this.#o.dir}/logs`;
  }

  /** Start everything; resolves false when a required part failed. */
  async start(): Promise<boolean> {
    const r = this.#r;
    const dir = this.#o.dir;
    await Deno.mkdir(this.logDir, { recursive: true });
    const api = await r.step("API emulator (in process)", async () => {
      this.api = await startApiServer({ port: 0, kubeconfigPath: `${dir}/kubeconfig` });
      const kc = new KubeConfig();
      kc.loadFromFile(this.api.kubeconfigPath);
      this.client = new RestKubeClient(kc, { userAgent: "s3csi-sandbox" });
      return this.api.url;
    }, (url) => url);
    if (!api || !this.client) return false;
    const c = this.client;
    const objects = await r.step("CRD, namespace, PriorityClass, CSIDriver applied", async () => {
      await c.create(CRDS, s3paCrd());
      await c.create(PRIORITY_CLASSES, {
        metadata: { name: MOUNTPOINT_PRIORITY_CLASS },
        value: 1_000_000_000,
        globalDefault: false,
        preemptionPolicy: "PreemptLowerPriority",
        description: "Mountpoint Pods: they serve the volumes of running workloads",
      });
      await c.create(NAMESPACES, { metadata: { name: DEFAULT_MOUNTPOINT_NAMESPACE } });
      await c.create(CSI_DRIVERS, {
        metadata: { name: DRIVER_NAME },
        spec: {
          attachRequired: false,
          podInfoOnMount: true,
          requiresRepublish: true,
          volumeLifecycleModes: ["Persistent"],
        },
      });
      return "";
    });
    if (objects === undefined) return false;
    const control = await r.step("Scheduler and PV binder (emulated)", async () => {
      this.scheduler = new Scheduler(c);
      await this.scheduler.start();
      this.binder = new VolumeBinder({
        client: c,
        resyncMs: 2000,
        events: new EventRecorder(c, { component: "persistentvolume-controller", host: "" }),
      });
      await this.binder.start();
      return "";
    });
    if (control === undefined) return false;
    const s3 = await r.step("S3 server", async () => {
      this.s3 = await startS3Server(this.#o.s3, dir, this.logDir, this.#o.signal);
      const e = this.s3.env;
      this.s3Client = new S3Client({
        endpoint: e.S3_ENDPOINT,
        region: e.AWS_REGION,
        forcePathStyle: true,
        credentials: { accessKeyId: e.AWS_ACCESS_KEY_ID, secretAccessKey: e.AWS_SECRET_ACCESS_KEY },
        requestChecksumCalculation: "WHEN_REQUIRED",
        responseChecksumValidation: "WHEN_REQUIRED",
      });
      return this.s3;
    }, (s) => `${s.kind} at ${s.env.S3_ENDPOINT}${s.note ? ` (${s.note})` : ""}`);
    if (!s3) return false;
    for (let i = 1; i <= this.#o.nodes; i++) {
      const ok = await r.step(
        `Node node-${i}: node plugin process + kubelet emulator, driver registered`,
        () => this.#startNode(`node-${i}`),
        (n) => `socket ${n.socket}`,
      );
      if (!ok) return false;
    }
    if (this.#o.withoutController) {
      r.report("Controller process", "info", "not started (--without-controller)");
      return true;
    }
    await r.step("Controller process", async () => {
      const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const metrics = `127.0.0.1:${(probe.addr as Deno.NetAddr).port}`;
      probe.close();
      this.controller = await ChildProcess.binary("controller", [], {
        KUBECONFIG: `${dir}/kubeconfig`,
        MOUNTPOINT_NAMESPACE: DEFAULT_MOUNTPOINT_NAMESPACE,
        MOUNTPOINT_IMAGE: "s3-csi-mounter:sandbox",
        METRICS_ADDRESS: metrics,
        LOG_FORMAT: "text",
      }, `${this.logDir}/controller.log`);
      await new Promise((res) => setTimeout(res, 1500));
      if (this.controller.exitCode !== undefined) {
        throw new Error(`exited with ${this.controller.exitCode} (log ${this.controller.logPath})`);
      }
      return `pid ${this.controller.pid}, metrics http://${metrics}/metrics`;
    }, (d) => d);
    return true;
  }

  async #startNode(name: string): Promise<SandboxNode> {
    const root = `${this.#o.dir}/${name}/kubelet`;
    await Deno.mkdir(root, { recursive: true });
    const socket = `${pluginDir(root)}/csi.sock`;
    const e = this.s3!.env;
    const plugin = await ChildProcess.binary(
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
        KUBECONFIG: `${this.#o.dir}/kubeconfig`,
        CSI_NODE_NAME: name,
        MOUNTPOINT_NAMESPACE: DEFAULT_MOUNTPOINT_NAMESPACE,
        AWS_ACCESS_KEY_ID: e.AWS_ACCESS_KEY_ID,
        AWS_SECRET_ACCESS_KEY: e.AWS_SECRET_ACCESS_KEY,
        AWS_REGION: e.AWS_REGION,
        AWS_ENDPOINT_URL: e.S3_ENDPOINT,
        S3_ENDPOINT_URL: e.S3_ENDPOINT,
        LOG_FORMAT: "text",
      },
      `${this.logDir}/node-plugin-${name}.log`,
      `node plugin ${name}`,
    );
    const kubelet = new Kubelet({
      client: this.client!,
      nodeName: name,
      kubeletRoot: root,
      driverSocket: socket,
      restartBackoff: { initialMs: 2000, maxMs: 20_000 },
    });
    const node = { name, root, socket, plugin, kubelet };
    this.nodes.push(node);
    await kubelet.start();
    await waitUntil("driver registration (NodeGetInfo)", () => {
      if (plugin.exitCode !== undefined) {
        throw new Error(`node plugin exited with ${plugin.exitCode} (log ${plugin.logPath})`);
      }
      return kubelet.driverRegistered;
    }, 30_000);
    return node;
  }

  /**
   * Delete the remaining workload pods through the API (the normal unpublish path), then give
   * the controller time to release the Mountpoint Pods. Reported only when there was something.
   */
  async drain(): Promise<void> {
    const c = this.client;
    if (!c) return;
    const workloads = (await c.list<Pod>(PODS).catch(() => ({ items: [] as Pod[] }))).items
      .filter((p) => p.metadata.namespace !== DEFAULT_MOUNTPOINT_NAMESPACE);
    if (!workloads.length) return;
    const t0 = performance.now();
    const title = "Remaining pods deleted through the API (unpublish, then release)";
    try {
      for (const p of workloads) {
        await c.delete(PODS, p.metadata.name, p.metadata.namespace).catch(() => false);
      }
      await waitUntil(
        "the workload pods to go",
        async () =>
          (await c.list<Pod>(PODS)).items.every((p) =>
            p.metadata.namespace === DEFAULT_MOUNTPOINT_NAMESPACE
          ),
        10_000,
      );
      if (this.controller && this.controller.exitCode === undefined) {
        await waitUntil(
          "the Mountpoint Pods to go",
          async () =>
            !(await c.list(PODS, { namespace: DEFAULT_MOUNTPOINT_NAMESPACE })).items.length,
          30_000,
        );
      }
      this.#r.report(title, "ok", `${workloads.length} pod(s)`, performance.now() - t0);
    } catch (err) {
      // Not a failure by itself: the kubelets' shutdown below stops and unpublishes what is left,
      // and the final check says whether anything leaked.
      const why = err instanceof Error ? err.message : String(err);
      this.#r.report(
        title,
        "info",
        `${why}; left to the kubelets' shutdown`,
        performance.now() - t0,
      );
    }
  }

  /** Stop everything in dependency order; each part bounded. */
  async stop(): Promise<void> {
    const r = this.#r;
    if (this.controller) {
      await r.step("Controller stopped", () => this.controller!.stop(10_000), (c) => `exit ${c}`);
    }
    await r.step("Kubelets stopped (containers killed, volumes unpublished)", async () => {
      await Promise.all(this.nodes.map((n) => n.kubelet.stop(30_000)));
      return this.nodes.length;
    }, (n) => `${n} node(s)`);
    await r.step("Node plugins stopped", async () => {
      const codes = await Promise.all(this.nodes.map((n) => n.plugin.stop(15_000)));
      return codes.join(", ");
    }, (codes) => `exit ${codes}`);
    await this.scheduler?.stop();
    await this.binder?.stop();
    await r.step("S3 server stopped", async () => {
      await this.s3?.stop();
      return this.s3?.kind ?? "none";
    }, (k) => k);
    await this.api?.stop();
    this.s3Client?.destroy();
  }
}
