/**
 * Deterministic names for S3PAs and Mountpoint Pods, derived from the sharing key, so that a
 * controller that restarts mid-reconcile finds what it created instead of creating a duplicate.
 *
 * @module
 */
import { createHash } from "node:crypto";
import type { S3paSpec } from "../api/mountpoint_s3_pod_attachment.ts";

/** The fields of an S3PA spec that decide sharing (everything but the assignments). */
export type SharingKey = Omit<S3paSpec, "mountpointS3PodAttachments"> & {
  readonly driverVersion: string;
};

function digest(text: string, hexChars: number): string {
  return createHash("sha256").update(text).digest("hex").slice(0, hexChars);
}

/**
 * Canonical text of a sharing key: fixed field order, absent optionals as "". The cache is
 * appended only when the volume has one, and the workload identity (namespace, ServiceAccount,
 * role) only with `pod` authentication, so keys (and names) of other volumes are what they were
 * before caches and pod identity existed.
 */
export function canonicalSharingKey(key: SharingKey): string {
  return JSON.stringify([
    key.nodeName,
    key.persistentVolumeName,
    key.volumeID,
    key.mountOptions,
    key.workloadFSGroup,
    key.authenticationSource,
    key.secretNamespace ?? "",
    key.secretName ?? "",
    key.driverVersion,
    ...(key.cache ? [key.cache] : []),
    ...(key.authenticationSource === "pod"
      ? [
        `pod=${
          JSON.stringify([
            key.workloadNamespace ?? "",
            key.workloadServiceAccountName ?? "",
            key.workloadServiceAccountIAMRoleARN ?? "",
          ])
        }`,
      ]
      : []),
  ]);
}

/** Name of the S3PA for a sharing key: `s3pa-<40 hex>`. */
export function s3paName(key: SharingKey): string {
  return `s3pa-${digest(canonicalSharingKey(key), 40)}`;
}

/**
 * Name of the `index`-th Mountpoint Pod of an S3PA: `mp-<40 hex>`. Index 0 is the first pod;
 * a higher index is used when earlier pods take no new workloads (annotated or being unmounted).
 */
export function mountpointPodName(s3pa: string, index: number): string {
  return `mp-${digest(`${s3pa}/${index}`, 40)}`;
}

/**
 * Name of a headroom pod of workload `uid`: `hr-<40 hex>` for the placement pod, with `-mp` for the
 * Mountpoint Pods' reservation.
 */
export function headroomPodName(uid: string, role: "placement" | "mountpoint"): string {
  return `hr-${digest(uid, 40)}${role === "mountpoint" ? "-mp" : ""}`;
}
