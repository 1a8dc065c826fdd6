/**
 * One pod's life on an emulated node, in kubelet v1.32 order (`pkg/kubelet/pod_workers.go` and
 * `SyncPod`/`SyncTerminatingPod` in `pkg/kubelet/kubelet.go` of `k8s.io/kubernetes`):
 *
 * 1. pod dirs, status Pending with containers `ContainerCreating`;
 * 2. volumes (retried with `FailedMount` events; no container starts before all are ready);
 * 3. containers as processes, restarted per `restartPolicy` with CrashLoopBackOff back-off, status
 *    PATCHed to `pods/<name>/status` on every change;
 * 4. a pod whose containers are all done (Succeeded/Failed) gets its volumes unpublished;
 * 5. deletion (`deletionTimestamp`): SIGTERM, SIGKILL after the grace period, terminal status,
 *    NodeUnpublishVolume (retried), final status, `DELETE` with grace 0 and a UID precondition,
 *    then the pod dir is removed. A force-deleted pod gets the same clean-up without API writes;
 * 6. local-storage eviction (`local_storage_eviction.ts`, every `evictionMs`): an emptyDir over its
 *    `sizeLimit`, or the pod over its containers' `ephemeral-storage` limits, kills the containers
 *    at once, unpublishes the volumes and leaves the pod `Failed`/`Evicted` (not deleted).
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { ConflictError, NotFoundError } from "../../../src/kube/errors.ts";
import { PODS } from "../../../src/kube/resources.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { type BackoffSettings } from "./backoff.ts";
import type { ContainerProcess } from "./container_process.ts";
import { type ContainerRunContext, runContainer } from "./container_runner.ts";
import { type ImageMapping, isMountpointPod } from "./container_spec.ts";
import type { ApiEventRecorder } from "../../../src/kube/event_recorder.ts";
import { type Pod, type PodStatus } from "./k8s_types.ts";
import { podDir, podVolumesDir } from "./kubelet_paths.ts";
import { podRef } from "./pod_ref.ts";
import {
  buildPodStatus,
  type ContainerRecord,
  finalizeRecords,
  newContainerRecord,
} from "./pod_status.ts";
import type { VolumeManager } from "./volume_manager.ts";
import { aborted, pause } from "../../../src/util/sleep.ts";
import {
  diskUsage,
  EVICTED,
  type LocalStorageUsage,
  localStorageViolation,
} from "./local_storage_eviction.ts";
import { kubeTime } from "../../../src/kube/time.ts";

/** What a worker needs from its kubelet. */
export interface PodWorkerDeps {
  readonly client: KubeClient;
  readonly nodeName: string;
  readonly kubeletRoot: string;
  readonly volumes: VolumeManager;
  readonly events: ApiEventRecorder;
  readonly mountpointImage: ImageMapping;
  /** Container logs go to `<logRoot>/<ns>_<name>_<uid>/<container>/<restart>.log`. */
  readonly logRoot: string;
  readonly restartBackoff?: BackoffSettings;
  /** Republish period for drivers with `requiresRepublish`; 0 disables. */
  readonly republishMs: number;
  readonly requiresRepublish: () => Promise<boolean>;
  /** Volume stats period (NodeGetVolumeStats when advertised); 0 disables. */
  readonly statsMs: number;
  /** Local-storage eviction check period (kubelet: 10 s); 0 disables. @default 0 */
  readonly evictionMs?: number;
  /** Called once the worker is finished and the pod is gone (or the kubelet stopped). */
  readonly onDone: (uid: string) => void;
}

/** The worker of one pod (keyed by UID). */
export class PodWorker {
  readonly #d: PodWorkerDeps;
  readonly #log = logger("kubelet", "pod");
  readonly #terminate = new AbortController();
  readonly #stop = new AbortController();
  readonly #records: ContainerRecord[];
  readonly #initRecords: ContainerRecord[];
  #initialized: boolean;
  readonly #procs = new Map<string, ContainerProcess>();
  #pod: Pod;
  #startTime = kubeTime();
  #forceDeleted = false;
  #statusChain: Promise<void> = Promise.resolve();
  #phaseOverride: PodStatus["phase"] = undefined;
  /** Why the pod was evicted, once it was. */
  #evicted: string | undefined;
  #gone: Promise<void>;
  #resolveGone!: () => void;
  /** Resolves when the worker has finished everything. */
  readonly done: Promise<void>;

  /** Create and start the worker for `pod`. */
  constructor(deps: PodWorkerDeps, pod: Pod) {
    this.#d = deps;
    this.#pod = pod;
    const inits = pod.spec.initContainers ?? [];
    const waiting = inits.length ? "PodInitializing" : "ContainerCreating";
    this.#initRecords = inits.map((c) => newContainerRecord(c.name, c.image ?? "", waiting));
    this.#initialized = !inits.length;
    this.#records = pod.spec.containers.map((c) =>
      newContainerRecord(c.name, c.image ?? "", waiting)
    );
    this.#gone = new Promise((r) => this.#resolveGone = r);
    const phase = pod.status?.phase;
    this.done = (phase === "Succeeded" || phase === "Failed" ? this.#waitGone() : this.#run())
      .catch((err) => {
        this.#log.error("Pod worker {pod} failed: {error}", {
          pod: this.#name,
          error: errorMessage(err),
        });
      })
      .finally(() => deps.onDone(pod.metadata.uid));
  }

  get #name(): string {
    return `${this.#pod.metadata.namespace}/${this.#pod.metadata.name}`;
  }

  /** The latest object from the watch. */
  update(pod: Pod): void {
    this.#pod = pod;
    if (pod.metadata.deletionTimestamp && !this.#terminate.signal.aborted) {
      this.#log.info("Pod {pod} is being deleted: terminating", { pod: this.#name });
      this.#terminate.abort(new Error("pod is being deleted"));
    }
  }

  /** The object is gone from the API (force delete, or our own final DELETE). */
  deleted(): void {
    this.#forceDeleted = true;
    this.#terminate.abort(new Error("pod was deleted"));
    this.#resolveGone();
  }

  /** Kubelet shutdown: stop containers and unpublish volumes, without API writes. */
  stop(): void {
    this.#stop.abort(new Error("kubelet stopping"));
    this.#terminate.abort(new Error("kubelet stopping"));
  }

  async #waitGone(): Promise<void> {
    await Promise.race([
      this.#gone,
      aborted(this.#stop.signal),
    ]);
    await this.#removePodDir();
  }

  async #run(): Promise<void> {
    const term = this.#terminate.signal;
    const uid = this.#pod.metadata.uid;
    for (
      const d of [
        podDir(this.#d.kubeletRoot, uid),
        podVolumesDir(this.#d.kubeletRoot, uid),
        `${podDir(this.#d.kubeletRoot, uid)}/plugins`,
      ]
    ) {
      await Deno.mkdir(d, { recursive: true, mode: 0o750 });
      await Deno.chmod(d, 0o751);
    }
    this.#syncStatus();
    let paths: Map<string, string> | undefined;
    try {
      paths = await this.#d.volumes.setUp(this.#pod, term);
    } catch (err) {
      if (!term.aborted) throw err;
    }
    if (paths && !term.aborted) {
      // Republishing stops with the containers (terminating pods are not republished).
      const running = new AbortController();
      const stopRepublish = () => running.abort();
      term.addEventListener("abort", stopRepublish, { once: true });
      const republisher = Promise.all([
        this.#republishLoop(running.signal),
        this.#statsLoop(running.signal),
        this.#evictionLoop(running.signal, paths),
      ]);
      const runners = this.#runInitContainers(paths).then((ok) =>
        ok
          ? Promise.all(
            this.#pod.spec.containers.map((c, i) =>
              runContainer(this.#runContext, c, this.#records[i]!, paths!)
            ),
          )
          : []
      );
      await Promise.race([runners, aborted(term)]);
      running.abort();
      term.removeEventListener("abort", stopRepublish);
      await republisher;
      if (term.aborted) await this.#killContainers();
      await runners;
    }
    if (!term.aborted) {
      // Every container is done and none restarts: the pod is terminal; its volumes go.
      this.#syncStatus();
      await this.#statusChain;
      await this.#d.volumes.tearDown(uid, this.#stop.signal);
      await Promise.race([this.#gone, aborted(term)]);
    }
    await this.#terminatePod();
  }

  async #republishLoop(signal: AbortSignal): Promise<void> {
    if (!this.#d.republishMs || !(await this.#d.requiresRepublish().catch(() => false))) return;
    while (!signal.aborted) {
      await pause(this.#d.republishMs * (1 + Math.random() * 0.5), signal);
      if (signal.aborted) return;
      await this.#d.volumes.republish(this.#pod, signal);
    }
  }

  /**
   * Init containers, one after the other; each must exit 0 (restarted on failure unless the pod's
   * policy is `Never`, which fails the pod). Resolves true when the containers may start.
   */
  async #runInitContainers(paths: Map<string, string>): Promise<boolean> {
    const policy = this.#pod.spec.restartPolicy === "Never" ? "Never" : "OnFailure";
    const inits = this.#pod.spec.initContainers ?? [];
    for (const [i, c] of inits.entries()) {
      const code = await runContainer(this.#runContext, c, this.#initRecords[i]!, paths, policy);
      if (this.#terminate.signal.aborted || code !== 0) return false;
    }
    if (inits.length) {
      this.#initialized = true;
      for (const r of this.#records) r.state = { waiting: { reason: "ContainerCreating" } };
      this.#syncStatus();
    }
    return true;
  }

  /** Volume stats: one run at start, then every `statsMs`–2×`statsMs` (kubelet: 60–120 s). */
  async #statsLoop(signal: AbortSignal): Promise<void> {
    if (!this.#d.statsMs) return;
    while (!signal.aborted) {
      await this.#d.volumes.collectStats(this.#pod.metadata.uid);
      await pause(this.#d.statsMs * (1 + Math.random()), signal);
    }
  }

  /** Local-storage eviction (step 6): check every `evictionMs` until evicted or stopped. */
  async #evictionLoop(signal: AbortSignal, paths: ReadonlyMap<string, string>): Promise<void> {
    if (!this.#d.evictionMs) return;
    while (!signal.aborted) {
      await pause(this.#d.evictionMs, signal);
      if (signal.aborted) return;
      const message = localStorageViolation(this.#pod, await this.#localStorageUsage(paths));
      if (!message) continue;
      this.#evicted = message;
      this.#log.warn("Evicting pod {pod}: {message}", { pod: this.#name, message });
      void this.#d.events.record(this.#pod, "Warning", EVICTED, message);
      this.#terminate.abort(new Error(`evicted: ${message}`));
      return;
    }
  }

  async #localStorageUsage(paths: ReadonlyMap<string, string>): Promise<LocalStorageUsage> {
    const volumes = new Map<string, number>();
    for (const v of this.#pod.spec.volumes ?? []) {
      const path = paths.get(v.name);
      if (v.emptyDir && path) volumes.set(v.name, await diskUsage(path));
    }
    const containers = new Map<string, number>();
    const p = this.#pod.metadata;
    for (const c of this.#pod.spec.containers) {
      const logs = `${this.#d.logRoot}/${p.namespace}_${p.name}_${p.uid}/${c.name}`;
      containers.set(c.name, await diskUsage(logs));
    }
    return { volumes, containers };
  }

  /** True for Mountpoint Pods (stopped after the workloads on kubelet shutdown). */
  get isMountpointPod(): boolean {
    return isMountpointPod(this.#pod);
  }

  #logPath(name: string, restart: number): string {
    const p = this.#pod.metadata;
    return `${this.#d.logRoot}/${p.namespace}_${p.name}_${p.uid}/${name}/${restart}.log`;
  }

  /** Log file of a container's current (or last) run. */
  logPath(container: string): string {
    const r = this.#records.find((x) => x.name === container);
    return this.#logPath(container, r?.restartCount ?? 0);
  }

  /** Log file of a container's run before the current one; undefined when it never restarted. */
  previousLogPath(container: string): string | undefined {
    const r = this.#records.find((x) => x.name === container);
    return r && r.restartCount > 0 ? this.#logPath(container, r.restartCount - 1) : undefined;
  }

  get #runContext(): ContainerRunContext {
    return {
      pod: () => this.#pod,
      client: this.#d.client,
      events: this.#d.events,
      nodeName: this.#d.nodeName,
      mountpointImage: this.#d.mountpointImage,
      ...(this.#d.restartBackoff ? { restartBackoff: this.#d.restartBackoff } : {}),
      logPath: (name, restart) => this.#logPath(name, restart),
      terminate: this.#terminate.signal,
      sync: () => this.#syncStatus(),
      procs: this.#procs,
    };
  }

  /** Queue a status PATCH of the current state (serialized, errors logged). */
  #syncStatus(): void {
    if (this.#forceDeleted) return;
    const status = buildPodStatus({
      spec: this.#pod.spec,
      records: this.#records,
      initRecords: this.#initRecords,
      initialized: this.#initialized,
      startTime: this.#startTime,
      now: kubeTime(),
      ...(this.#phaseOverride ? { phase: this.#phaseOverride } : {}),
      ...(this.#evicted ? { reason: EVICTED, message: this.#evicted } : {}),
    });
    const p = this.#pod.metadata;
    this.#statusChain = this.#statusChain.then(async () => {
      if (this.#forceDeleted) return;
      try {
        await this.#d.client.patch(PODS, p.name, p.namespace, { status }, {
          subresource: "status",
        });
      } catch (err) {
        if (err instanceof NotFoundError) return;
        this.#log.warn("Status update of pod {pod} failed: {error}", {
          pod: this.#name,
          error: errorMessage(err),
        });
      }
    });
  }

  /** Termination (step 5 above): kill, terminal status, unpublish, final status, DELETE, dirs. */
  /** StopContainer for every running container: SIGTERM, SIGKILL after the grace period. */
  async #killContainers(): Promise<void> {
    const grace = Math.max(
      0,
      this.#pod.metadata.deletionGracePeriodSeconds ??
        this.#pod.spec.terminationGracePeriodSeconds ?? 30,
    );
    // An eviction for local storage kills at once (grace period override 0).
    const graceMs = this.#evicted !== undefined
      ? 0
      : this.#stop.signal.aborted
      ? Math.min(grace * 1000, 2000)
      : grace * 1000;
    await Promise.all([...this.#procs.entries()].map(async ([name, proc]) => {
      if (!this.#forceDeleted && !this.#stop.signal.aborted) {
        void this.#d.events.record(this.#pod, "Normal", "Killing", `Stopping container ${name}`);
      }
      await proc.stop(graceMs);
    }));
  }

  async #terminatePod(): Promise<void> {
    await this.#killContainers();
    if (this.#evicted !== undefined && !this.#stop.signal.aborted) {
      // Evicted: Failed at once, volumes unpublished, the object kept until someone deletes it.
      this.#phaseOverride = "Failed";
      finalizeRecords(this.#records, kubeTime());
      this.#syncStatus();
      await this.#statusChain;
      await this.#d.volumes.tearDown(this.#pod.metadata.uid, this.#stop.signal);
      await Promise.race([this.#gone, aborted(this.#stop.signal)]);
      this.#d.events.forget(this.#pod.metadata.uid);
      await this.#removePodDir();
      return;
    }
    const allZero = this.#records.every((r) => r.state.terminated?.exitCode === 0);
    const anyStarted = this.#records.some((r) => r.started);
    if (!this.#stop.signal.aborted) {
      if (anyStarted) this.#phaseOverride = allZero ? "Succeeded" : "Failed";
      // Real kubelet PATCHes the terminal phase here, before unpublishing. The API emulator
      // removes a terminating pod as soon as its phase is terminal (a shortcut for runs without a
      // kubelet, see "What is not emulated" in docs/apiserver.md), which would drop the object before
      // NodeUnpublishVolume; so the emulator reports the containers' exits but keeps the phase
      // until the final status below.
      const saved = this.#phaseOverride;
      this.#phaseOverride = "Running";
      if (anyStarted) this.#syncStatus();
      this.#phaseOverride = saved;
      await this.#statusChain;
    }
    // On kubelet shutdown volumes are still unpublished, within a bounded time.
    const clean = await this.#d.volumes.tearDown(
      this.#pod.metadata.uid,
      this.#stop.signal.aborted ? AbortSignal.timeout(15_000) : this.#stop.signal,
    );
    if (this.#stop.signal.aborted) {
      await this.#removePodDir();
      return;
    }
    while (!clean && (await this.#d.volumes.podVolumesMounted(this.#pod.metadata.uid))) {
      await pause(100, this.#stop.signal);
      if (this.#stop.signal.aborted) return;
    }
    finalizeRecords(this.#records, kubeTime());
    if (this.#phaseOverride === undefined) {
      this.#phaseOverride = allZero && anyStarted ? "Succeeded" : "Failed";
    }
    this.#syncStatus();
    await this.#statusChain;
    if (!this.#forceDeleted) {
      const m = this.#pod.metadata;
      try {
        await this.#d.client.delete(PODS, m.name, m.namespace, {
          gracePeriodSeconds: 0,
          preconditions: { uid: m.uid },
        });
      } catch (err) {
        if (!(err instanceof NotFoundError) && !(err instanceof ConflictError)) throw err;
      }
    }
    this.#d.events.forget(this.#pod.metadata.uid);
    await this.#removePodDir();
  }

  /** `cleanupOrphanedPodDirs`, refusing to remove anything that still has a mount below it. */
  async #removePodDir(): Promise<void> {
    const dir = podDir(this.#d.kubeletRoot, this.#pod.metadata.uid);
    const mounts = await readMountInfo();
    const held = mounts.find((m) => m.mountPoint === dir || m.mountPoint.startsWith(`${dir}/`));
    if (held) {
      this.#log.warn("Pod dir {dir} still has a mount at {mount}: left in place", {
        dir,
        mount: held.mountPoint,
      });
      return;
    }
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }

  /** Pod reference for logs and reports. */
  get ref(): string {
    return podRef(this.#pod);
  }
}
