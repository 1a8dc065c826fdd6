/**
 * Pure operations on MountpointS3PodAttachment objects: who is attached where, adding and removing
 * workloads, and whether a Mountpoint Pod may take a new workload.
 *
 * @module
 */
import type {
  MountpointS3PodAttachment,
  WorkloadAttachment,
} from "../api/mountpoint_s3_pod_attachment.ts";
import type { Pod } from "../kube/types.ts";
import {
  ANNOTATION_NEEDS_UNMOUNT,
  ANNOTATION_NO_NEW_WORKLOAD,
  isAnnotatedTrue,
  LABEL_DRIVER_VERSION,
} from "../mppod/labels.ts";

/** Every workload UID in an attachment. */
export function workloadUIDs(s3pa: MountpointS3PodAttachment): string[] {
  return Object.values(s3pa.spec.mountpointS3PodAttachments).flatMap((list) =>
    list.map((a) => a.workloadPodUID)
  );
}

/** The Mountpoint Pod serving `uid` in this attachment, if any. */
export function mountpointPodOf(s3pa: MountpointS3PodAttachment, uid: string): string | undefined {
  for (const [mp, list] of Object.entries(s3pa.spec.mountpointS3PodAttachments)) {
    if (list.some((a) => a.workloadPodUID === uid)) return mp;
  }
  return undefined;
}

/** A copy of `s3pa` with `entry` added under Mountpoint Pod `mp`. */
export function withWorkload(
  s3pa: MountpointS3PodAttachment,
  mp: string,
  entry: WorkloadAttachment,
): MountpointS3PodAttachment {
  const map = { ...s3pa.spec.mountpointS3PodAttachments };
  map[mp] = [...(map[mp] ?? []), entry];
  return { ...s3pa, spec: { ...s3pa.spec, mountpointS3PodAttachments: map } };
}

/**
 * A copy of `s3pa` without the workloads `keep` rejects; Mountpoint Pods left with no workload are
 * removed from the map and returned in `emptied`.
 */
export function withoutWorkloads(
  s3pa: MountpointS3PodAttachment,
  drop: (a: WorkloadAttachment) => boolean,
): { next: MountpointS3PodAttachment; emptied: string[]; removed: number } {
  const map: Record<string, WorkloadAttachment[]> = {};
  const emptied: string[] = [];
  let removed = 0;
  for (const [mp, list] of Object.entries(s3pa.spec.mountpointS3PodAttachments)) {
    const kept = list.filter((a) => !drop(a));
    removed += list.length - kept.length;
    if (kept.length) map[mp] = kept;
    else emptied.push(mp);
  }
  return {
    next: { ...s3pa, spec: { ...s3pa.spec, mountpointS3PodAttachments: map } },
    emptied,
    removed,
  };
}

/**
 * True when a Mountpoint Pod may take a new workload: it exists, is not being deleted or
 * unmounted, is not finished or failed, was not marked `no-new-workload`, and was created by this
 * driver version (version-aware sharing: an upgrade never attaches new workloads to old pods).
 */
export function acceptsNewWorkload(mp: Pod | undefined, driverVersion: string): boolean {
  if (!mp) return false;
  if (mp.metadata.deletionTimestamp) return false;
  const phase = mp.status?.phase;
  if (phase === "Succeeded" || phase === "Failed") return false;
  const annotations = mp.metadata.annotations;
  if (isAnnotatedTrue(annotations, ANNOTATION_NEEDS_UNMOUNT)) return false;
  if (isAnnotatedTrue(annotations, ANNOTATION_NO_NEW_WORKLOAD)) return false;
  return mp.metadata.labels?.[LABEL_DRIVER_VERSION] === driverVersion;
}

/**
 * True while a workload must keep its Mountpoint Pod: not terminal, and if it is being deleted,
 * only while it still runs (its containers may use the volume during their grace period).
 */
export function isActiveWorkload(pod: Pod): boolean {
  const phase = pod.status?.phase;
  if (phase === "Succeeded" || phase === "Failed") return false;
  if (pod.metadata.deletionTimestamp) return phase === "Running";
  return true;
}
