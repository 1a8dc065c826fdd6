/**
 * The pod reconciler: keeps MountpointS3PodAttachments (S3PAs) and Mountpoint Pods in step with
 * the workload Pods that use this driver's volumes. Keys are Pod keys (`namespace/name`).
 *
 * reconcile(key):
 * 1. Pod gone → if it was a workload, detach its UID everywhere; if it was a Mountpoint Pod that
 *    still serves workloads, recreate it (same deterministic name).
 * 2. Mountpoint Pod → `Succeeded` or `Failed`: delete it (a failed one is then recreated by step 1
 *    if workloads remain); `Running`: record its readiness latency once.
 * 3. Workload not scheduled → nothing, unless it opted in to headroom (`headroom.ts`: room
 *    reserved with headroom pods, then the workload pinned and ungated). Not active (terminal, or
 *    terminating before it ran) → detach. Otherwise for each volume of ours: attach under the
 *    sharing key; its headroom pods go once its Mountpoint Pods run.
 * 4. Headroom pod → reconcile its workload (or delete it when the workload is gone).
 *
 * attach: per S3PA lock; reuse a suitable Mountpoint Pod of the S3PA (1 write: S3PA update) or
 * create/adopt the next deterministic one and create or update the S3PA (2 writes). Other
 * workloads of the same claim, node and key that wait for an attachment join the same write (a
 * Deployment's replicas landing on one node cost one write, not one each). Conflicts are retried
 * against a fresh GET. Writes are remembered in a {@link FreshView} so the next reconcile sees them
 * before the informer does.
 *
 * @module
 */
import type { MountpointS3PodAttachment } from "../api/mountpoint_s3_pod_attachment.ts";
import { API_VERSION } from "../api/group_version.ts";
import { S3PA_KIND } from "../api/mountpoint_s3_pod_attachment.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import { AlreadyExistsError, ConflictError, NotFoundError } from "../kube/errors.ts";
import type { EventRecorder } from "../kube/event_recorder.ts";
import type { Informer } from "../kube/informer.ts";
import { NODES, PODS } from "../kube/resources.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  ServiceAccount,
} from "../kube/types.ts";
import {
  ANNOTATION_BROKEN,
  ANNOTATION_NEEDS_UNMOUNT,
  COMPONENT_HEADROOM_POD,
  COMPONENT_MOUNTPOINT_POD,
  LABEL_COMPONENT,
  LABEL_DRIVER_VERSION,
  LABEL_HEADROOM_FOR,
  LABEL_NEEDS_UNMOUNT,
  TRUE,
} from "../mppod/labels.ts";
import {
  canonicalSharingKey,
  mountpointPodName,
  s3paName,
  type SharingKey,
} from "../mppod/naming.ts";
import {
  mountpointPod,
  type MountpointPodConfig,
  MountpointPodSpecError,
} from "../mppod/pod_spec.ts";
import { coversTolerations } from "../mppod/tolerations.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import {
  acceptsNewWorkload,
  isActiveWorkload,
  mountpointPodOf,
  withoutWorkloads,
  withWorkload,
  workloadUIDs,
} from "./attachments.ts";
import { FreshView } from "./fresh_view.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { keyOfAttachment, sharingKey, SharingKeyError, specOfKey } from "./sharing_key.ts";
import type { ProcessResult } from "../util/work_queue.ts";
import {
  claimKeys,
  inlineVolumeOf,
  type VolumeProblem,
  type WorkloadVolume,
  workloadVolumes,
} from "./workload_volumes.ts";
import { Headroom } from "./headroom.ts";
import { hasHeadroomGate, type HeadroomConfig } from "./headroom_pods.ts";
import { kubeTime } from "../kube/time.ts";

/** Informer index names. */
export const INDEX = {
  podUID: "uid",
  podClaim: "claim",
  podServiceAccount: "serviceAccount",
  headroomFor: "headroomFor",
  s3paWorkload: "workload",
  s3paMountpointPod: "mountpointPod",
  s3paKey: "sharingKey",
} as const;

/** The caches the reconciler reads. */
export interface ControllerCaches {
  readonly pods: Informer<Pod>;
  readonly pvcs: Informer<PersistentVolumeClaim>;
  readonly pvs: Informer<PersistentVolume>;
  readonly s3pas: Informer<MountpointS3PodAttachment>;
  /** Read for `authenticationSource: pod` (the role annotation). */
  readonly serviceAccounts: Informer<ServiceAccount>;
  /** Nodes (name and UID): the Mountpoint Pods' owner. Without it, Nodes are read on demand. */
  readonly nodes?: Informer<KubeObject>;
}

/** Register the indexes the reconciler and cleaner use. Call before the informers run. */
export function registerIndexes(c: ControllerCaches): void {
  c.pods.addIndex(INDEX.podUID, (p) => (p.metadata.uid ? [p.metadata.uid] : []));
  c.pods.addIndex(INDEX.podClaim, claimKeys);
  c.pods.addIndex(INDEX.podServiceAccount, (p) => [
    `${p.metadata.namespace}/${p.spec.serviceAccountName || "default"}`,
  ]);
  c.pods.addIndex(INDEX.headroomFor, (p) => {
    const uid = p.metadata.labels?.[LABEL_HEADROOM_FOR];
    return uid ? [uid] : [];
  });
  c.s3pas.addIndex(INDEX.s3paWorkload, workloadUIDs);
  c.s3pas.addIndex(
    INDEX.s3paMountpointPod,
    (s) => Object.keys(s.spec?.mountpointS3PodAttachments ?? {}),
  );
  c.s3pas.addIndex(
    INDEX.s3paKey,
    (s) => (s.spec ? [canonicalSharingKey(keyOfAttachment(s.spec, s.metadata?.labels))] : []),
  );
}

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  readonly client: KubeClient;
  readonly caches: ControllerCaches;
  readonly podConfig: MountpointPodConfig;
  readonly recorder: EventRecorder;
  readonly metrics: ControllerMetrics;
  /** Headroom settings; headroom is off without them. */
  readonly headroom?: HeadroomConfig;
  /** @default Date.now */
  readonly now?: () => number;
}

const MAX_CONFLICT_RETRIES = 5;

/** Most workloads attached by one attachment write. */
const MAX_BATCH = 64;

/** The reconciler. */
export class Reconciler {
  readonly #o: ReconcilerOptions;
  readonly #s3pas: FreshView<MountpointS3PodAttachment>;
  readonly #pods: FreshView<Pod>;
  readonly #locks = new KeyedMutex();
  readonly #deletedUIDs = new Map<string, string>();
  readonly #deletedHeadroom = new Map<string, string>();
  readonly #readySince = new Map<string, number>();
  readonly #log = logger("controller", "reconciler");
  readonly #headroom: Headroom;

  /** Create a reconciler over `options.caches`. */
  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#s3pas = new FreshView(options.caches.s3pas);
    this.#pods = new FreshView(options.caches.pods);
    this.#headroom = new Headroom({
      client: options.client,
      ...(options.headroom ? { config: options.headroom } : {}),
      podConfig: options.podConfig,
      recorder: options.recorder,
      pod: (key) => this.#pods.get(key),
      wrote: (key, pod) => pod ? this.#pods.wrote(pod) : this.#pods.deleted(key),
      headroomPodsOf: (uid) => options.caches.pods.byIndex(INDEX.headroomFor, uid),
      nodeUid: (name) => this.#nodeUid(name),
    });
  }

  /** Annotations of a workload's ServiceAccount, from the cache. */
  readonly #serviceAccount = (namespace: string, name: string) =>
    this.#o.caches.serviceAccounts.get(`${namespace}/${name}`)?.metadata.annotations;

  get #ns(): string {
    return this.#o.podConfig.namespace;
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }

  /**
   * Remember a deleted pod's UID so its key can still be detached (informer delete handler); for a
   * headroom pod, its workload's, whose reservation then goes on.
   */
  podDeleted(pod: Pod): void {
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const workload = pod.metadata.labels?.[LABEL_HEADROOM_FOR];
    if (pod.metadata.namespace === this.#ns && workload) this.#deletedHeadroom.set(key, workload);
    else if (pod.metadata.uid) this.#deletedUIDs.set(key, pod.metadata.uid);
  }

  /** Reconcile one pod key. */
  async reconcile(key: string): Promise<ProcessResult | void> {
    const pod = this.#pods.get(key);
    const [namespace, name] = key.split("/") as [string, string];
    if (!pod) {
      const uid = this.#deletedUIDs.get(key);
      if (uid) {
        await this.detachWorkload(uid);
        await this.#headroom.settle(uid, { ended: true });
        this.#deletedUIDs.delete(key);
      }
      const headroomFor = this.#deletedHeadroom.get(key);
      if (headroomFor) {
        this.#deletedHeadroom.delete(key);
        const workload = this.#o.caches.pods.byIndex(INDEX.podUID, headroomFor)[0];
        if (workload) return await this.#reconcileWorkload(workload);
        return;
      }
      if (namespace === this.#ns) await this.#ensureReferencedMountpointPod(name);
      return;
    }
    const component = pod.metadata.labels?.[LABEL_COMPONENT];
    if (namespace === this.#ns && component === COMPONENT_MOUNTPOINT_POD) {
      return await this.#reconcileMountpointPod(pod);
    }
    if (namespace === this.#ns && component === COMPONENT_HEADROOM_POD) {
      return await this.#reconcileHeadroomPod(pod);
    }
    return await this.#reconcileWorkload(pod);
  }

  /** The S3 volumes of a workload (and what a user must fix about the others). */
  #volumesOf(pod: Pod): { volumes: WorkloadVolume[]; problems: VolumeProblem[] } {
    const { pvcs, pvs } = this.#o.caches;
    return workloadVolumes(pod, {
      pvc: (ns, n) => pvcs.get(`${ns}/${n}`),
      pv: (n) => pvs.get(n),
    });
  }

  async #reconcileWorkload(pod: Pod): Promise<ProcessResult | void> {
    const uid = pod.metadata.uid!;
    if (!pod.spec.nodeName) {
      if (!isActiveWorkload(pod) || pod.metadata.deletionTimestamp) {
        await this.#headroom.settle(uid, { ended: true });
      } else if (hasHeadroomGate(pod)) {
        const { volumes, problems } = this.#volumesOf(pod);
        for (const p of problems) {
          await this.#o.recorder.record(pod, "Warning", p.reason, p.message);
        }
        // Every claim must be bound first: the room reserved is that of all the volumes.
        if (problems.length) return { requeueAfterMs: 30_000 };
        await this.#headroom.reserve(pod, volumes);
      }
      return;
    }
    if (!isActiveWorkload(pod)) {
      await this.detachWorkload(uid);
      await this.#headroom.settle(uid, { ended: true });
      return;
    }
    const { volumes, problems } = this.#volumesOf(pod);
    for (const p of problems) await this.#o.recorder.record(pod, "Warning", p.reason, p.message);
    let failed: unknown;
    for (const volume of volumes) {
      try {
        await this.#attach(pod, volume);
      } catch (err) {
        if (err instanceof SharingKeyError || err instanceof MountpointPodSpecError) {
          await this.#o.recorder.record(pod, "Warning", "InvalidVolume", err.message);
        } else failed = err;
      }
    }
    if (failed) throw failed;
    await this.#settleHeadroom(pod, volumes.length);
    // Problems are re-checked when the PVC changes; the slow retry covers PVs appearing later.
    return problems.length ? { requeueAfterMs: 30_000 } : undefined;
  }

  /** Release a bound workload's headroom pods as far as its Mountpoint Pods allow. */
  async #settleHeadroom(pod: Pod, volumes: number): Promise<void> {
    const uid = pod.metadata.uid!;
    if (!this.#headroom.reserved(uid)) return;
    const mountpointPods = this.#o.caches.s3pas.byIndex(INDEX.s3paWorkload, uid).flatMap(
      (cached) => {
        const s3pa = this.#s3pas.get(cached.metadata.name!);
        const mp = s3pa ? mountpointPodOf(s3pa, uid) : undefined;
        const p = mp ? this.#pods.get(`${this.#ns}/${mp}`) : undefined;
        return p ? [p] : [];
      },
    );
    await this.#headroom.settle(uid, { ended: false, volumes, mountpointPods });
  }

  /** A headroom pod: its workload's flow goes on, or it goes when its workload is gone. */
  async #reconcileHeadroomPod(hp: Pod): Promise<ProcessResult | void> {
    const uid = hp.metadata.labels?.[LABEL_HEADROOM_FOR];
    const workload = uid ? this.#o.caches.pods.byIndex(INDEX.podUID, uid)[0] : undefined;
    if (!workload) {
      if (uid) await this.#headroom.settle(uid, { ended: true });
      return;
    }
    return await this.#reconcileWorkload(workload);
  }

  #findAttachment(key: SharingKey, name: string): MountpointS3PodAttachment | undefined {
    const own = this.#s3pas.get(name);
    if (own) return own;
    // An attachment of the same key under another name (created by an older controller).
    return this.#o.caches.s3pas.byIndex(INDEX.s3paKey, canonicalSharingKey(key))
      .map((s) => this.#s3pas.get(s.metadata.name!))
      .find((s) => s !== undefined);
  }

  /**
   * True when workload `uid` is in an attachment of volume `pv` on `node` other than `name` (the
   * attachment of its current key): one written under another sharing key — another driver
   * version's, or a volume changed since (its mount options) — whose Mountpoint Pod mounted it.
   */
  #attachedUnderOtherKey(uid: string, pv: string, node: string, name: string): boolean {
    return this.#o.caches.s3pas.byIndex(INDEX.s3paWorkload, uid).some((cached) => {
      if (cached.metadata.name === name) return false;
      const s = this.#s3pas.get(cached.metadata.name!) ?? cached;
      return s.spec.persistentVolumeName === pv && s.spec.nodeName === node &&
        mountpointPodOf(s, uid) !== undefined;
    });
  }

  async #attach(pod: Pod, volume: WorkloadVolume): Promise<void> {
    const key = sharingKey(pod, volume.pv, this.#o.podConfig.driverVersion, this.#serviceAccount);
    const name = s3paName(key);
    const uid = pod.metadata.uid!;
    // Attached under another key (another driver version's, before an upgrade or a rollback): it
    // keeps that Mountpoint Pod, which serves its mount; a second one would never be used.
    if (this.#attachedUnderOtherKey(uid, volume.pv.metadata.name!, pod.spec.nodeName!, name)) {
      return;
    }
    await this.#locks.run(name, async () => {
      for (let attempt = 0;; attempt++) {
        const s3pa = this.#findAttachment(key, name);
        if (s3pa && mountpointPodOf(s3pa, uid)) return;
        try {
          const mp = await this.#chooseMountpointPod(
            pod,
            s3pa,
            s3pa?.metadata.name ?? name,
            key,
            volume.pv,
          );
          const time = kubeTime(new Date(this.#now()));
          const batch = [pod, ...this.#companions(pod, volume, key, s3pa, mp)];
          const entries = batch.map((p) => ({
            workloadPodUID: p.metadata.uid!,
            attachmentTime: time,
          }));
          const written = s3pa
            ? await this.#o.client.update(
              S3PAS,
              entries.reduce((s, e) => withWorkload(s, mp, e), s3pa),
            )
            : await this.#o.client.create<MountpointS3PodAttachment>(S3PAS, {
              apiVersion: API_VERSION,
              kind: S3PA_KIND,
              metadata: {
                name,
                labels: { [LABEL_DRIVER_VERSION]: this.#o.podConfig.driverVersion },
              },
              spec: { ...specOfKey(key), mountpointS3PodAttachments: { [mp]: entries } },
            });
          this.#s3pas.wrote(written);
          for (const p of batch) {
            this.#log.info(
              "Attached workload {pod} to Mountpoint Pod {mountpointPod} via {attachment}",
              {
                pod: `${p.metadata.namespace}/${p.metadata.name}`,
                mountpointPod: mp,
                attachment: written.metadata.name,
              },
            );
          }
          return;
        } catch (err) {
          if (
            !(err instanceof ConflictError || err instanceof AlreadyExistsError) ||
            attempt >= MAX_CONFLICT_RETRIES
          ) {
            if (!(err instanceof ConflictError)) {
              this.#o.metrics.apiError(s3pa ? "update" : "create");
            }
            throw err;
          }
          this.#log.debug("Attaching {pod} to {attachment}: {error}; retrying with a fresh copy", {
            pod: `${pod.metadata.namespace}/${pod.metadata.name}`,
            attachment: s3pa?.metadata.name ?? name,
            error: errorMessage(err),
          });
          await this.#refresh(s3pa?.metadata.name ?? name);
        }
      }
    });
  }

  /**
   * Other workloads that share `pod`'s claim, node and sharing key, are active and are not in the
   * attachment yet: they join the same write. (Each one's own reconcile then finds it attached.)
   */
  #companions(
    pod: Pod,
    volume: WorkloadVolume,
    key: SharingKey,
    s3pa: MountpointS3PodAttachment | undefined,
    mp: string,
  ): Pod[] {
    if (!volume.pvc) return []; // an inline volume is its pod's alone
    const claim = `${pod.metadata.namespace}/${volume.pvc.metadata.name}`;
    const attached = new Set(s3pa ? workloadUIDs(s3pa) : []);
    const canonical = canonicalSharingKey(key);
    const mpTolerations = this.#pods.get(`${this.#ns}/${mp}`)?.spec.tolerations;
    const out: Pod[] = [];
    for (const other of this.#o.caches.pods.byIndex(INDEX.podClaim, claim)) {
      if (out.length >= MAX_BATCH - 1) break;
      const uid = other.metadata.uid;
      if (!uid || uid === pod.metadata.uid || attached.has(uid)) continue;
      if (this.#attachedUnderOtherKey(uid, volume.pv.metadata.name!, pod.spec.nodeName!, "")) {
        continue; // it keeps its Mountpoint Pod of another version
      }
      if (other.spec.nodeName !== pod.spec.nodeName || !isActiveWorkload(other)) continue;
      if (!coversTolerations(mpTolerations, other.spec.tolerations)) continue;
      try {
        const k = sharingKey(
          other,
          volume.pv,
          this.#o.podConfig.driverVersion,
          this.#serviceAccount,
        );
        if (canonicalSharingKey(k) !== canonical) continue;
      } catch {
        continue; // its own reconcile reports the problem
      }
      out.push(other);
    }
    return out;
  }

  /** Re-read an S3PA from the API after a conflict and remember the answer. */
  async #refresh(name: string): Promise<void> {
    const fresh = await this.#o.client.get<MountpointS3PodAttachment>(S3PAS, name);
    if (fresh) this.#s3pas.wrote(fresh);
    else this.#s3pas.deleted(name);
  }

  /**
   * Pick the Mountpoint Pod for a new workload: a suitable pod already in the S3PA, else the first
   * deterministic name that is free (created now) or holds a suitable orphan (adopted).
   */
  async #chooseMountpointPod(
    pod: Pod,
    s3pa: MountpointS3PodAttachment | undefined,
    attachmentName: string,
    key: SharingKey,
    pv: PersistentVolume,
  ): Promise<string> {
    const inMap = Object.keys(s3pa?.spec.mountpointS3PodAttachments ?? {}).sort();
    for (const mp of inMap) {
      if (this.#accepts(this.#pods.get(`${this.#ns}/${mp}`), pod)) return mp;
    }
    for (let i = 0;; i++) {
      const mp = mountpointPodName(attachmentName, i);
      if (inMap.includes(mp)) continue;
      const existing = this.#pods.get(`${this.#ns}/${mp}`);
      if (existing) {
        if (this.#accepts(existing, pod)) return mp;
        continue;
      }
      await this.#createMountpointPod(mp, attachmentName, key, pv, [pod]);
      return mp;
    }
  }

  /**
   * True when Mountpoint Pod `mp` may serve workload `pod`: it takes new workloads and tolerates
   * every `NoExecute` taint the workload does (else the workload could stay where its Mountpoint
   * Pod is evicted).
   */
  #accepts(mp: Pod | undefined, pod: Pod): boolean {
    return acceptsNewWorkload(mp, this.#o.podConfig.driverVersion) &&
      coversTolerations(mp!.spec.tolerations, pod.spec.tolerations);
  }

  /** UID of Node `name` (the informer's, else a GET); undefined when there is no such Node. */
  async #nodeUid(name: string): Promise<string | undefined> {
    const cached = this.#o.caches.nodes?.get(name)?.metadata?.uid;
    if (cached) return cached;
    const node = await this.#o.client.get<KubeObject>(NODES, name);
    return node?.metadata?.uid;
  }

  /** Create Mountpoint Pod `name` for `workloads` (the first one gets the events). */
  async #createMountpointPod(
    name: string,
    attachmentName: string,
    key: SharingKey,
    pv: PersistentVolume,
    workloads: readonly Pod[],
  ): Promise<void> {
    const workload = workloads[0];
    const nodeUid = await this.#nodeUid(key.nodeName);
    if (!nodeUid) {
      this.#log.warn(
        "Node {node} is not known: Mountpoint Pod {mountpointPod} gets no owner (kubectl drain then calls it unmanaged)",
        { node: key.nodeName, mountpointPod: name },
      );
    }
    const spec = mountpointPod(this.#o.podConfig, {
      name,
      attachmentName,
      spec: specOfKey(key),
      volumeAttributes: pv.spec.csi?.volumeAttributes ?? {},
      mountOptions: pv.spec.mountOptions ?? [],
      workloadTolerations: workloads.map((w) => w.spec.tolerations),
      ...(nodeUid ? { nodeUid } : {}),
      ...optional("priorityClassName", this.#headroom.priorityClassFor(workloads)),
    });
    try {
      this.#pods.wrote(await this.#o.client.create(PODS, spec));
      const scheduled = workload?.status?.conditions?.find((c) => c.type === "PodScheduled")
        ?.lastTransitionTime;
      this.#readySince.set(
        name,
        typeof scheduled === "string" ? Date.parse(scheduled) : this.#now(),
      );
      this.#log.info("Created Mountpoint Pod {mountpointPod} on node {node} for volume {pv}", {
        mountpointPod: name,
        node: key.nodeName,
        pv: key.persistentVolumeName,
      });
    } catch (err) {
      if (err instanceof AlreadyExistsError) return;
      this.#o.metrics.mountpointPodCreateFailed();
      if (workload) {
        await this.#o.recorder.record(
          workload,
          "Warning",
          "MountpointPodCreateFailed",
          `Cannot create Mountpoint Pod ${this.#ns}/${name}: ${errorMessage(err)}. ` +
            `Check that namespace ${this.#ns} exists and the controller may create pods there`,
        );
      }
      throw err;
    }
  }

  async #reconcileMountpointPod(mp: Pod): Promise<ProcessResult | void> {
    const phase = mp.status?.phase;
    const name = mp.metadata.name!;
    if (phase === "Running") {
      const since = this.#readySince.get(name);
      if (since !== undefined) {
        this.#readySince.delete(name);
        this.#o.metrics.mountpointPodReady((this.#now() - since) / 1000);
      }
      // Its workloads' headroom is no longer needed once all their Mountpoint Pods run.
      for (const s3pa of this.#o.caches.s3pas.byIndex(INDEX.s3paMountpointPod, name)) {
        for (const w of s3pa.spec.mountpointS3PodAttachments[name] ?? []) {
          if (!this.#headroom.reserved(w.workloadPodUID)) continue;
          const workload = this.#o.caches.pods.byIndex(INDEX.podUID, w.workloadPodUID)[0];
          if (workload) {
            await this.#settleHeadroom(workload, this.#volumesOf(workload).volumes.length);
          }
        }
      }
    }
    // A running pod too: the node plugin marks a pod broken while it runs (its engine gave up,
    // it changed, it is of a version the node plugin cannot use).
    const broken = mp.metadata.annotations?.[ANNOTATION_BROKEN];
    if (
      (phase === "Succeeded" || phase === "Failed" || broken) && !mp.metadata.deletionTimestamp
    ) {
      if (broken) await this.#reportBroken(mp, broken);
      this.#log.info("Deleting {phase} Mountpoint Pod {mountpointPod}", {
        phase: broken ? "broken" : phase,
        mountpointPod: name,
      });
      const gone = await this.#o.client.delete(PODS, name, this.#ns, {
        preconditions: { uid: mp.metadata.uid! },
        gracePeriodSeconds: 0,
      }).catch((err) => {
        if (err instanceof ConflictError) return false;
        throw err;
      });
      if (gone) this.#pods.deleted(`${this.#ns}/${name}`);
    }
  }

  /**
   * A Mountpoint Pod the node plugin gave up on: say why on each workload it serves (they keep
   * their mount as it is; a new pod serves their next publish and new workloads).
   */
  async #reportBroken(mp: Pod, reason: string): Promise<void> {
    const name = mp.metadata.name!;
    for (const s3pa of this.#o.caches.s3pas.byIndex(INDEX.s3paMountpointPod, name)) {
      for (const w of s3pa.spec.mountpointS3PodAttachments[name] ?? []) {
        const pod = this.#o.caches.pods.byIndex(INDEX.podUID, w.workloadPodUID)[0];
        if (!pod || !isActiveWorkload(pod)) continue;
        await this.#o.recorder.record(
          pod,
          "Warning",
          "MountpointPodBroken",
          `Mountpoint Pod ${this.#ns}/${name} of volume ${s3pa.spec.persistentVolumeName} was given up and is replaced: ${reason}`,
        );
      }
    }
  }

  /** Recreate a Mountpoint Pod that vanished while its S3PA still lists active workloads. */
  async #ensureReferencedMountpointPod(name: string): Promise<void> {
    for (const cached of this.#o.caches.s3pas.byIndex(INDEX.s3paMountpointPod, name)) {
      await this.#locks.run(cached.metadata.name!, async () => {
        const s3pa = this.#s3pas.get(cached.metadata.name!);
        if (s3pa) await this.#recreateIfGone(s3pa, name);
      });
    }
  }

  /**
   * Under the S3PA's lock: recreate Mountpoint Pod `name` of `s3pa` when it is gone (not in the
   * cache, nor written by us) while active workloads still use it.
   */
  async #recreateIfGone(s3pa: MountpointS3PodAttachment, name: string): Promise<void> {
    const workloads = s3pa.spec.mountpointS3PodAttachments[name] ?? [];
    const active = workloads.filter((w) => {
      const pod = this.#o.caches.pods.byIndex(INDEX.podUID, w.workloadPodUID)[0];
      return pod !== undefined && isActiveWorkload(pod);
    });
    if (active.length === 0 || this.#pods.get(`${this.#ns}/${name}`)) return;
    const workload = this.#o.caches.pods.byIndex(INDEX.podUID, active[0]!.workloadPodUID)[0];
    // An inline volume (found by its per-pod handle) before a PV of the same name.
    const pv = (workload &&
      inlineVolumeOf(workload, s3pa.spec.persistentVolumeName, s3pa.spec.volumeID)) ??
      this.#o.caches.pvs.get(s3pa.spec.persistentVolumeName);
    if (!pv) return;
    this.#log.warn(
      "Mountpoint Pod {mountpointPod} is gone but serves {count} workloads: recreating it",
      { mountpointPod: name, count: active.length },
    );
    const pods = active.flatMap((w) =>
      this.#o.caches.pods.byIndex(INDEX.podUID, w.workloadPodUID).slice(0, 1)
    );
    await this.#createMountpointPod(
      name,
      s3pa.metadata.name!,
      keyOfAttachment(s3pa.spec, s3pa.metadata.labels),
      pv,
      pods,
    );
  }

  /**
   * Remove workload `uid` from every S3PA. Mountpoint Pods left without workloads are annotated
   * `needs-unmount` (the node plugin then unmounts and the pod exits); an empty S3PA is deleted.
   */
  async detachWorkload(uid: string): Promise<void> {
    for (const cached of this.#o.caches.s3pas.byIndex(INDEX.s3paWorkload, uid)) {
      const name = cached.metadata.name!;
      await this.#locks.run(
        name,
        () => this.#removeFromAttachment(name, (a) => a.workloadPodUID === uid),
      );
    }
  }

  /** Remove the attachments `drop` selects from S3PA `name` (under its lock); used by the stale cleaner. */
  async removeFromAttachment(
    name: string,
    drop: (a: { workloadPodUID: string; attachmentTime: string }) => boolean,
  ): Promise<void> {
    await this.#locks.run(name, () => this.#removeFromAttachment(name, drop));
  }

  async #removeFromAttachment(
    name: string,
    drop: (a: { workloadPodUID: string; attachmentTime: string }) => boolean,
  ): Promise<void> {
    for (let attempt = 0;; attempt++) {
      const s3pa = this.#s3pas.get(name);
      if (!s3pa) return;
      const { next, emptied, removed } = withoutWorkloads(s3pa, drop);
      if (removed === 0) return;
      try {
        for (const mp of emptied) await this.#markNeedsUnmount(mp);
        if (Object.keys(next.spec.mountpointS3PodAttachments).length === 0) {
          await this.#o.client.delete(S3PAS, name, undefined, {
            preconditions: { resourceVersion: s3pa.metadata.resourceVersion! },
          });
          this.#s3pas.deleted(name);
          this.#log.info("Deleted attachment {attachment}: no workload left", { attachment: name });
        } else {
          this.#s3pas.wrote(await this.#o.client.update(S3PAS, next));
        }
        return;
      } catch (err) {
        if (!(err instanceof ConflictError) || attempt >= MAX_CONFLICT_RETRIES) throw err;
        await this.#refresh(name);
      }
    }
  }

  async #markNeedsUnmount(mp: string): Promise<void> {
    const pod = this.#pods.get(`${this.#ns}/${mp}`);
    if (!pod || pod.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT] === TRUE) return;
    const unschedulable = !pod.spec.nodeName &&
      pod.status?.conditions?.some((c) =>
        c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable"
      );
    if (unschedulable) {
      // The scheduler could not place it (no room on the node, say): nothing was mounted for it,
      // no node plugin will ever unmount it. Deleted at once instead of waiting for the stale
      // sweep.
      const gone = await this.#o.client.delete(PODS, mp, this.#ns, {
        preconditions: { uid: pod.metadata.uid! },
        gracePeriodSeconds: 0,
      }).catch((err) => {
        if (err instanceof ConflictError) return false;
        throw err;
      });
      if (gone) this.#pods.deleted(`${this.#ns}/${mp}`);
      this.#log.info("Deleted unschedulable Mountpoint Pod {mountpointPod}: no workload left", {
        mountpointPod: mp,
      });
      return;
    }
    try {
      this.#pods.wrote(
        // The label takes the pod out of the PodDisruptionBudget that refuses evicting Mountpoint
        // Pods in use (node drain may then evict it); the annotation is what the node plugin reads.
        await this.#o.client.patch<Pod>(PODS, mp, this.#ns, {
          metadata: {
            annotations: { [ANNOTATION_NEEDS_UNMOUNT]: TRUE },
            labels: { [LABEL_NEEDS_UNMOUNT]: TRUE },
          },
        }),
      );
      this.#log.info("Mountpoint Pod {mountpointPod} has no workload left: marked needs-unmount", {
        mountpointPod: mp,
      });
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }
}

/** `{ [key]: value }`, or nothing when `value` is undefined (exact optional properties). */
function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
