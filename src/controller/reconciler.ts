/**
 * The pod reconciler: keeps MountpointS3PodAttachments (S3PAs) and Mountpoint Pods in step with
 * the workload Pods that use this driver's volumes. Keys are Pod keys (`namespace/name`).
 *
 * reconcile(key):
 * 1. Pod gone → if it was a workload, detach its UID everywhere; if it was a Mountpoint Pod that
 *    still serves workloads, recreate it (same deterministic name).
 * 2. Mountpoint Pod → `Succeeded` or `Failed`: delete it (a failed one is then recreated by step 1
 *    if workloads remain); `Running`: record its readiness latency once.
 * 3. Workload not scheduled → nothing. Not active (terminal, or terminating before it ran) →
 *    detach. Otherwise for each volume of ours: attach under the sharing key.
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
import type { KubeClient } from "../kube/client.ts";
import { AlreadyExistsError, ConflictError, NotFoundError } from "../kube/errors.ts";
import type { EventRecorder } from "../kube/event_recorder.ts";
import type { Informer } from "../kube/informer.ts";
import { PODS } from "../kube/resources.ts";
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
  COMPONENT_MOUNTPOINT_POD,
  LABEL_COMPONENT,
  LABEL_DRIVER_VERSION,
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
  type WorkloadVolume,
  workloadVolumes,
} from "./workload_volumes.ts";
import { kubeTime } from "../kube/time.ts";

/** Informer index names. */
export const INDEX = {
  podUID: "uid",
  podClaim: "claim",
  podServiceAccount: "serviceAccount",
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
}

/** Register the indexes the reconciler and cleaner use. Call before the informers run. */
export function registerIndexes(c: ControllerCaches): void {
  c.pods.addIndex(INDEX.podUID, (p) => (p.metadata.uid ? [p.metadata.uid] : []));
  c.pods.addIndex(INDEX.podClaim, claimKeys);
  c.pods.addIndex(INDEX.podServiceAccount, (p) => [
    `${p.metadata.namespace}/${p.spec.serviceAccountName || "default"}`,
  ]);
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
  readonly #readySince = new Map<string, number>();
  readonly #log = logger("controller", "reconciler");

  /** Create a reconciler over `options.caches`. */
  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#s3pas = new FreshView(options.caches.s3pas);
    this.#pods = new FreshView(options.caches.pods);
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

  /** Remember a deleted pod's UID so its key can still be detached (informer delete handler). */
  podDeleted(pod: Pod): void {
    if (pod.metadata.uid) {
      this.#deletedUIDs.set(`${pod.metadata.namespace}/${pod.metadata.name}`, pod.metadata.uid);
    }
  }

  /** Reconcile one pod key. */
  async reconcile(key: string): Promise<ProcessResult | void> {
    const pod = this.#pods.get(key);
    const [namespace, name] = key.split("/") as [string, string];
    if (!pod) {
      const uid = this.#deletedUIDs.get(key);
      if (uid) {
        await this.detachWorkload(uid);
        this.#deletedUIDs.delete(key);
      }
      if (namespace === this.#ns) await this.#ensureReferencedMountpointPod(name);
      return;
    }
    if (
      namespace === this.#ns && pod.metadata.labels?.[LABEL_COMPONENT] === COMPONENT_MOUNTPOINT_POD
    ) {
      return await this.#reconcileMountpointPod(pod);
    }
    return await this.#reconcileWorkload(pod);
  }

  async #reconcileWorkload(pod: Pod): Promise<ProcessResult | void> {
    if (!pod.spec.nodeName) return;
    const uid = pod.metadata.uid!;
    if (!isActiveWorkload(pod)) {
      await this.detachWorkload(uid);
      return;
    }
    const { pvcs, pvs } = this.#o.caches;
    const { volumes, problems } = workloadVolumes(pod, {
      pvc: (ns, n) => pvcs.get(`${ns}/${n}`),
      pv: (n) => pvs.get(n),
    });
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
    // Problems are re-checked when the PVC changes; the slow retry covers PVs appearing later.
    return problems.length ? { requeueAfterMs: 30_000 } : undefined;
  }

  #findAttachment(key: SharingKey, name: string): MountpointS3PodAttachment | undefined {
    const own = this.#s3pas.get(name);
    if (own) return own;
    // An attachment of the same key under another name (created by an older controller).
    return this.#o.caches.s3pas.byIndex(INDEX.s3paKey, canonicalSharingKey(key))
      .map((s) => this.#s3pas.get(s.metadata.name!))
      .find((s) => s !== undefined);
  }

  async #attach(pod: Pod, volume: WorkloadVolume): Promise<void> {
    const key = sharingKey(pod, volume.pv, this.#o.podConfig.driverVersion, this.#serviceAccount);
    const name = s3paName(key);
    const uid = pod.metadata.uid!;
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
          const batch = [pod, ...this.#companions(pod, volume, key, s3pa)];
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
  ): Pod[] {
    if (!volume.pvc) return []; // an inline volume is its pod's alone
    const claim = `${pod.metadata.namespace}/${volume.pvc.metadata.name}`;
    const attached = new Set(s3pa ? workloadUIDs(s3pa) : []);
    const canonical = canonicalSharingKey(key);
    const out: Pod[] = [];
    for (const other of this.#o.caches.pods.byIndex(INDEX.podClaim, claim)) {
      if (out.length >= MAX_BATCH - 1) break;
      const uid = other.metadata.uid;
      if (!uid || uid === pod.metadata.uid || attached.has(uid)) continue;
      if (other.spec.nodeName !== pod.spec.nodeName || !isActiveWorkload(other)) continue;
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
    const version = this.#o.podConfig.driverVersion;
    const inMap = Object.keys(s3pa?.spec.mountpointS3PodAttachments ?? {}).sort();
    for (const mp of inMap) {
      if (acceptsNewWorkload(this.#pods.get(`${this.#ns}/${mp}`), version)) return mp;
    }
    for (let i = 0;; i++) {
      const mp = mountpointPodName(attachmentName, i);
      if (inMap.includes(mp)) continue;
      const existing = this.#pods.get(`${this.#ns}/${mp}`);
      if (existing) {
        if (acceptsNewWorkload(existing, version)) return mp;
        continue;
      }
      await this.#createMountpointPod(mp, attachmentName, key, pv, pod);
      return mp;
    }
  }

  async #createMountpointPod(
    name: string,
    attachmentName: string,
    key: SharingKey,
    pv: PersistentVolume,
    workload?: Pod,
  ): Promise<void> {
    const spec = mountpointPod(this.#o.podConfig, {
      name,
      attachmentName,
      spec: specOfKey(key),
      volumeAttributes: pv.spec.csi?.volumeAttributes ?? {},
      mountOptions: pv.spec.mountOptions ?? [],
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
      return;
    }
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
    await this.#createMountpointPod(
      name,
      s3pa.metadata.name!,
      keyOfAttachment(s3pa.spec, s3pa.metadata.labels),
      pv,
      workload,
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
    try {
      this.#pods.wrote(
        await this.#o.client.patch<Pod>(PODS, mp, this.#ns, {
          metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: TRUE } },
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
