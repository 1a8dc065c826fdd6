/**
 * A kubelet emulator for one node: registers the Node, registers the CSI driver the way
 * node-driver-registrar + kubelet do (one NodeGetInfo, CSINode entry, node-id annotation), watches
 * the pods bound to the node (`spec.nodeName=<node>`) and runs a {@link PodWorker} per pod.
 *
 * What is real: processes (as the pod's user), CSI gRPC on the plugin's unix socket, directories,
 * FUSE mounts made by the driver. What is emulated: images (see `container_spec.ts`), namespaces
 * and cgroups (none), and the container runtime.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { AlreadyExistsError } from "../../../src/kube/errors.ts";
import { Informer } from "../../../src/kube/informer.ts";
import { NODES, PODS } from "../../../src/kube/resources.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { DRIVER_NAME } from "../../../src/util/version.ts";
import type { BackoffSettings } from "./backoff.ts";
import { CsiNodeCalls } from "./csi_node_calls.ts";
import type { ImageMapping } from "./container_spec.ts";
import { ApiEventRecorder } from "../../../src/kube/event_recorder.ts";
import { prepareMounterImage } from "./mounter_image.ts";
import type { CsiDriver, Node, Pod } from "./k8s_types.ts";
import { PodWorker } from "./pod_worker.ts";
import { VolumeManager } from "./volume_manager.ts";
import { pause } from "../../../src/util/sleep.ts";
import { kubeTime } from "../../../src/kube/time.ts";
import { CSI_DRIVERS, CSI_NODES } from "../../../src/kube/resources.ts";

/** Annotation kubelet keeps on the Node: driver name → node id (JSON). */
export const NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid";

/** Options of {@link Kubelet}. */
export interface KubeletOptions {
  readonly client: KubeClient;
  readonly nodeName: string;
  /** Kubelet `--root-dir` of this node (created, made traversable). */
  readonly kubeletRoot: string;
  /** Unix socket of the CSI node plugin. */
  readonly driverSocket: string;
  /** @default s3.csi.scality.com */
  readonly driverName?: string;
  /** What Mountpoint Pods run. @default this repo's mounter (`mounter_image.ts`) */
  readonly mountpointImage?: ImageMapping;
  /** Container log dir. @default `<kubeletRoot>/pod-logs` */
  readonly logRoot?: string;
  readonly nodeLabels?: Record<string, string>;
  readonly restartBackoff?: BackoffSettings;
  readonly volumeBackoff?: BackoffSettings;
  readonly csiTimeoutMs?: number;
  /** Republish period with `requiresRepublish` (kubelet: 60–90 s). 0 disables. @default 60000 */
  readonly republishMs?: number;
  /** Volume stats period (kubelet: 60–120 s); 0 disables. @default 60000 */
  readonly statsMs?: number;
  /** Local-storage eviction check period (kubelet housekeeping: 10 s); 0 disables. @default 10000 */
  readonly evictionMs?: number;
}

/** One emulated node's kubelet. */
export class Kubelet {
  readonly #o: KubeletOptions;
  readonly #log = logger("kubelet");
  readonly #stop = new AbortController();
  readonly #workers = new Map<string, PodWorker>();
  readonly #events: ApiEventRecorder;
  readonly #volumes: VolumeManager;
  #registered = false;
  #image: ImageMapping | undefined;
  #informer: Informer<Pod> | undefined;
  #tasks: Promise<unknown>[] = [];

  /** Create the kubelet; nothing happens before {@link start}. */
  constructor(options: KubeletOptions) {
    this.#o = options;
    this.#events = new ApiEventRecorder(
      options.client,
      "kubelet",
      options.nodeName,
      options.nodeName,
    );
    this.#volumes = new VolumeManager({
      client: options.client,
      kubeletRoot: options.kubeletRoot,
      nodeName: options.nodeName,
      driverName: this.#driver,
      socketPath: options.driverSocket,
      events: this.#events,
      isDriverRegistered: () => this.#registered,
      shutdown: this.#stop.signal,
      ...(options.csiTimeoutMs !== undefined ? { csiTimeoutMs: options.csiTimeoutMs } : {}),
      ...(options.volumeBackoff ? { backoff: options.volumeBackoff } : {}),
    });
  }

  get #driver(): string {
    return this.#o.driverName ?? DRIVER_NAME;
  }

  /** Node name. */
  get nodeName(): string {
    return this.#o.nodeName;
  }

  /** True once the CSI driver answered NodeGetInfo and CSINode was written. */
  get driverRegistered(): boolean {
    return this.#registered;
  }

  /** Pods with a worker (UIDs). */
  get podUIDs(): string[] {
    return [...this.#workers.keys()];
  }

  /** Log file of a container's current or last run, if the pod has a worker. */
  containerLogPath(podUID: string, container: string): string | undefined {
    return this.#workers.get(podUID)?.logPath(container);
  }

  /**
   * A container's log from byte `offset` on (`kubectl logs`, served through the API emulator's
   * `pods/log`): the current or last run, or with `previous` the run before. Undefined when the
   * pod has no worker here, the container never ran, or (`previous`) never restarted.
   */
  async readContainerLog(
    podUID: string,
    container: string,
    previous: boolean,
    offset: number,
  ): Promise<Uint8Array | undefined> {
    const worker = this.#workers.get(podUID);
    const path = previous ? worker?.previousLogPath(container) : worker?.logPath(container);
    if (!path) return undefined;
    const f = await Deno.open(path, { read: true }).catch(() => undefined);
    if (!f) return undefined;
    try {
      if (offset) await f.seek(offset, Deno.SeekMode.Start);
    } catch {
      f.close();
      return undefined;
    }
    // Reading the stream to its end closes the file.
    return new Uint8Array(await new Response(f.readable).arrayBuffer());
  }

  /** Register the node, start driver registration and the pod watch; resolves once synced. */
  async start(timeoutMs = 30_000): Promise<void> {
    const root = this.#o.kubeletRoot;
    await Deno.mkdir(`${root}/pods`, { recursive: true });
    await Deno.chmod(root, 0o751);
    await Deno.chmod(`${root}/pods`, 0o751);
    await Deno.mkdir(`${root}/deno-dir`, { recursive: true });
    await Deno.chmod(`${root}/deno-dir`, 0o1777);
    this.#image = this.#o.mountpointImage ?? await prepareMounterImage(root);
    await this.#registerNode();
    this.#tasks.push(this.#registerDriver());
    const informer = new Informer<Pod>(this.#o.client, PODS, {
      fieldSelector: `spec.nodeName=${this.#o.nodeName}`,
    });
    informer.on({
      add: (pod) => this.#onPod(pod),
      update: (_old, pod) => this.#onPod(pod),
      delete: (pod) => this.#workers.get(pod.metadata.uid)?.deleted(),
    });
    this.#informer = informer;
    this.#tasks.push(informer.run(this.#stop.signal));
    await informer.waitForSync(timeoutMs, this.#stop.signal);
    this.#log.info("Kubelet emulator for node {node} started (root {root})", {
      node: this.#o.nodeName,
      root,
    });
  }

  #onPod(pod: Pod): void {
    if (this.#stop.signal.aborted || pod.spec.nodeName !== this.#o.nodeName) return;
    const existing = this.#workers.get(pod.metadata.uid);
    if (existing) {
      existing.update(pod);
      return;
    }
    const worker = new PodWorker({
      client: this.#o.client,
      nodeName: this.#o.nodeName,
      kubeletRoot: this.#o.kubeletRoot,
      volumes: this.#volumes,
      events: this.#events,
      mountpointImage: this.#image!,
      logRoot: this.#o.logRoot ?? `${this.#o.kubeletRoot}/pod-logs`,
      ...(this.#o.restartBackoff ? { restartBackoff: this.#o.restartBackoff } : {}),
      republishMs: this.#o.republishMs ?? 60_000,
      statsMs: this.#o.statsMs ?? 60_000,
      evictionMs: this.#o.evictionMs ?? 10_000,
      requiresRepublish: async () =>
        (await this.#o.client.get<CsiDriver>(CSI_DRIVERS, this.#driver))?.spec
          ?.requiresRepublish ===
          true,
      onDone: (uid) => this.#workers.delete(uid),
    }, pod);
    this.#workers.set(pod.metadata.uid, worker);
    worker.update(pod);
  }

  async #registerNode(): Promise<void> {
    const name = this.#o.nodeName;
    const labels = {
      "kubernetes.io/hostname": name,
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": "amd64",
      ...(this.#o.nodeLabels ?? {}),
    };
    try {
      await this.#o.client.create<Node>(NODES, { metadata: { name, labels }, spec: {} });
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
      await this.#o.client.patch(NODES, name, undefined, { metadata: { labels } });
    }
    const now = kubeTime();
    await this.#o.client.patch(NODES, name, undefined, {
      status: {
        conditions: [{
          type: "Ready",
          status: "True",
          reason: "KubeletReady",
          message: "kubelet emulator is posting ready status",
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        }],
        addresses: [{ type: "InternalIP", address: "127.0.0.1" }, {
          type: "Hostname",
          address: name,
        }],
        nodeInfo: {
          kubeletVersion: "v1.32.0-emulated",
          operatingSystem: "linux",
          architecture: "amd64",
        },
        capacity: { cpu: "2", memory: "8Gi", pods: "110" },
        allocatable: { cpu: "2", memory: "8Gi", pods: "110" },
      },
    }, { subresource: "status" });
  }

  /** node-driver-registrar + `RegistrationHandler.RegisterPlugin`: NodeGetInfo once, CSINode. */
  async #registerDriver(): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      const exists = await Deno.lstat(this.#o.driverSocket).then(() => true, () => false);
      if (exists) {
        try {
          const info = await new CsiNodeCalls(this.#o.driverSocket, 10_000).info();
          if (!info.nodeId) throw new Error("NodeGetInfo returned an empty node_id");
          await this.#writeCsiNode(info.nodeId);
          this.#registered = true;
          this.#log.info("Registered CSI driver {driver} on node {node} (node id {id})", {
            driver: this.#driver,
            node: this.#o.nodeName,
            id: info.nodeId,
          });
          return;
        } catch (err) {
          this.#log.debug("Driver registration failed: {error}", { error: errorMessage(err) });
        }
      }
      await pause(500, signal);
    }
  }

  async #writeCsiNode(nodeId: string): Promise<void> {
    const c = this.#o.client;
    const name = this.#o.nodeName;
    const node = await c.get<Node>(NODES, name);
    const ids = JSON.parse(node?.metadata.annotations?.[NODE_ID_ANNOTATION] ?? "{}");
    ids[this.#driver] = nodeId;
    await c.patch(NODES, name, undefined, {
      metadata: { annotations: { [NODE_ID_ANNOTATION]: JSON.stringify(ids) } },
    });
    const entry = { name: this.#driver, nodeID: nodeId, topologyKeys: null };
    const existing = await c.get<{ spec?: { drivers?: { name: string }[] } }>(CSI_NODES, name);
    if (!existing) {
      await c.create(CSI_NODES, {
        metadata: {
          name,
          ownerReferences: node
            ? [{ apiVersion: "v1", kind: "Node", name, uid: node.metadata.uid }]
            : undefined,
        },
        spec: { drivers: [entry] },
      });
    } else {
      const drivers = (existing.spec?.drivers ?? []).filter((d) => d.name !== this.#driver);
      await c.patch(CSI_NODES, name, undefined, { spec: { drivers: [...drivers, entry] } });
    }
  }

  /**
   * Stop: every pod's containers are stopped and its volumes unpublished (no API writes) —
   * workload pods first, Mountpoint Pods last — then the watch ends. Bounded by `timeoutMs`.
   */
  async stop(timeoutMs = 30_000): Promise<void> {
    if (this.#stop.signal.aborted) return;
    const workers = [...this.#workers.values()];
    this.#stop.abort(new Error("kubelet stopped"));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise((r) => timer = setTimeout(r, timeoutMs));
    // Workloads first: their volumes are unpublished while the Mountpoint Pods still serve them.
    for (
      const group of [
        workers.filter((w) => !w.isMountpointPod),
        workers.filter((w) => w.isMountpointPod),
      ]
    ) {
      for (const w of group) w.stop();
      await Promise.race([Promise.all(group.map((w) => w.done)), deadline]);
    }
    await Promise.race([Promise.all(this.#tasks), deadline]);
    clearTimeout(timer);
    this.#informer = undefined;
  }
}
