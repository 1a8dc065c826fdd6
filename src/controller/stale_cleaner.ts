/**
 * Safety net for what the event-driven reconciler can miss (pods deleted while no controller
 * watched, a crash between two writes). Every interval:
 * 1. attachments whose workload Pod no longer exists and that are older than the threshold are
 *    removed (Mountpoint Pods left empty get `needs-unmount`; empty S3PAs are deleted);
 * 2. S3PAs with no attachment at all are deleted;
 * 3. Mountpoint Pods older than the threshold that no S3PA references are asked to unmount
 *    (Running) or deleted (not running).
 *
 * And once at start, as soon as the caches have synced ({@link StaleCleaner.releaseGone}): steps 1
 * and 2 whatever the attachments' age. A workload deleted before this leader filled its pod cache
 * (while no controller ran, or while this one waited for the previous leader's lease to expire)
 * never gives a delete event: the informer never knew it, and only a sweep can release it.
 *
 * @module
 */
import type { KubeClient } from "../kube/client.ts";
import { PODS } from "../kube/resources.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import type { Pod } from "../kube/types.ts";
import {
  ANNOTATION_NEEDS_UNMOUNT,
  COMPONENT_MOUNTPOINT_POD,
  isAnnotatedTrue,
  LABEL_COMPONENT,
  TRUE,
} from "../mppod/labels.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { type ControllerCaches, INDEX, type Reconciler } from "./reconciler.ts";

/** Options of {@link StaleCleaner}. */
export interface StaleCleanerOptions {
  readonly client: KubeClient;
  readonly caches: ControllerCaches;
  readonly reconciler: Reconciler;
  readonly namespace: string;
  readonly intervalMs: number;
  readonly thresholdMs: number;
  readonly now?: () => number;
}

/** What one pass did. */
export interface CleanupReport {
  removedAttachments: number;
  deletedEmpty: number;
  orphanPods: number;
}

/** The stale attachment cleaner. */
export class StaleCleaner {
  readonly #o: StaleCleanerOptions;
  readonly #log = logger("controller", "cleaner");

  /** Create a cleaner. */
  constructor(options: StaleCleanerOptions) {
    this.#o = options;
  }

  /**
   * Release the workloads that are already gone ({@link releaseGone}), then run a pass every
   * interval until `signal` aborts. Start it once the caches have synced.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (!signal.aborted) {
      await this.releaseGone().catch((err) =>
        this.#log.warn("Releasing vanished workloads at start failed: {error}", {
          error: errorMessage(err),
        })
      );
    }
    while (!signal.aborted) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, this.#o.intervalMs);
        signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
      });
      if (signal.aborted) return;
      await this.cleanOnce().catch((err) =>
        this.#log.warn("Stale cleanup failed: {error}", { error: errorMessage(err) })
      );
    }
  }

  /** One pass. */
  async cleanOnce(): Promise<CleanupReport> {
    const now = (this.#o.now ?? Date.now)();
    const { pods, s3pas } = this.#o.caches;
    const report = await this.#releaseAttachments(
      (a) => now - Date.parse(a.attachmentTime) > this.#o.thresholdMs,
    );
    for (const mp of pods.list()) {
      if (
        mp.metadata.namespace !== this.#o.namespace ||
        mp.metadata.labels?.[LABEL_COMPONENT] !== COMPONENT_MOUNTPOINT_POD
      ) continue;
      if (
        mp.metadata.deletionTimestamp ||
        s3pas.byIndex(INDEX.s3paMountpointPod, mp.metadata.name!).length > 0
      ) continue;
      const age = now - Date.parse(mp.metadata.creationTimestamp ?? "");
      if (!(age > this.#o.thresholdMs)) continue;
      report.orphanPods++;
      await this.#retire(mp).catch((err) =>
        this.#log.warn("Could not retire orphan Mountpoint Pod {mountpointPod}: {error}", {
          mountpointPod: mp.metadata.name,
          error: errorMessage(err),
        })
      );
    }
    return report;
  }

  /**
   * Remove, whatever their age, the attachments of workloads that no longer exist, and delete
   * empty S3PAs; orphan Mountpoint Pods are left to the periodic pass (a crash between creating a
   * Mountpoint Pod and recording it leaves one the reconciler adopts).
   *
   * Safe without the threshold once the caches have synced after this process became leader:
   * every entry then in the S3PA cache was written by an earlier leader, whose writes ended before
   * this one's lease began, for a pod that existed then; a pod the synced pod cache lacks was
   * deleted. (Entries this process writes meanwhile are for pods in its cache, and the removal
   * re-checks the cache under the S3PA's lock.)
   */
  async releaseGone(): Promise<CleanupReport> {
    const report = await this.#releaseAttachments(() => true);
    if (report.removedAttachments || report.deletedEmpty) {
      this.#log.info(
        "At start: released {removed} workloads that vanished before the caches synced; {empty} empty attachments deleted",
        { removed: report.removedAttachments, empty: report.deletedEmpty },
      );
    }
    return report;
  }

  /** Steps 1 and 2 for the entries `due` selects. */
  async #releaseAttachments(
    due: (a: { workloadPodUID: string; attachmentTime: string }) => boolean,
  ): Promise<CleanupReport> {
    const { pods, s3pas } = this.#o.caches;
    const report: CleanupReport = { removedAttachments: 0, deletedEmpty: 0, orphanPods: 0 };
    for (const s3pa of s3pas.list()) {
      const name = s3pa.metadata.name!;
      const entries = Object.values(s3pa.spec.mountpointS3PodAttachments).flat();
      if (entries.length === 0) {
        if (
          await this.#o.client.delete(S3PAS, name, undefined, {
            preconditions: { resourceVersion: s3pa.metadata.resourceVersion! },
          }).catch(() => false)
        ) {
          report.deletedEmpty++;
        }
        continue;
      }
      const stale = entries.filter((a) =>
        pods.byIndex(INDEX.podUID, a.workloadPodUID).length === 0 && due(a)
      );
      if (stale.length === 0) continue;
      const uids = new Set(stale.map((a) => a.workloadPodUID));
      this.#log.info("Removing {count} stale attachments from {attachment}", {
        count: uids.size,
        attachment: name,
      });
      await this.#o.reconciler.removeFromAttachment(
        name,
        (a) =>
          uids.has(a.workloadPodUID) && pods.byIndex(INDEX.podUID, a.workloadPodUID).length === 0,
      );
      report.removedAttachments += uids.size;
    }
    return report;
  }

  async #retire(mp: Pod): Promise<void> {
    const name = mp.metadata.name!;
    if (mp.status?.phase === "Running") {
      if (isAnnotatedTrue(mp.metadata.annotations, ANNOTATION_NEEDS_UNMOUNT)) return;
      this.#log.info("Orphan Mountpoint Pod {mountpointPod}: asking the node to unmount", {
        mountpointPod: name,
      });
      await this.#o.client.patch(PODS, name, this.#o.namespace, {
        metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: TRUE } },
      });
      return;
    }
    this.#log.info("Orphan Mountpoint Pod {mountpointPod} is not running: deleting it", {
      mountpointPod: name,
    });
    await this.#o.client.delete(PODS, name, this.#o.namespace, {
      preconditions: { uid: mp.metadata.uid! },
    });
  }
}
