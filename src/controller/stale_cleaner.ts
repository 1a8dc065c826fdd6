/**
 * Periodic safety net for what the event-driven reconciler can miss (pods deleted while the
 * controller was down, a crash between two writes):
 * 1. attachments whose workload Pod no longer exists and that are older than the threshold are
 *    removed (Mountpoint Pods left empty get `needs-unmount`; empty S3PAs are deleted);
 * 2. S3PAs with no attachment at all are deleted;
 * 3. Mountpoint Pods older than the threshold that no S3PA references are asked to unmount
 *    (Running) or deleted (not running).
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

  /** Run a pass every interval until `signal` aborts (first pass after one interval). */
  async run(signal: AbortSignal): Promise<void> {
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
        pods.byIndex(INDEX.podUID, a.workloadPodUID).length === 0 &&
        now - Date.parse(a.attachmentTime) > this.#o.thresholdMs
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
