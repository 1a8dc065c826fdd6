/**
 * Which of a workload Pod's volumes are ours: Pod → PVC → PV with `spec.csi.driver` equal to the
 * driver name. Problems a user can fix (PVC missing or unbound, PV missing or not bound back to
 * the claim) are reported so the controller can raise an Event on the Pod and retry later.
 *
 * @module
 */
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../kube/types.ts";
import { DRIVER_NAME } from "../util/version.ts";

/** A volume of the workload served by this driver. */
export interface WorkloadVolume {
  readonly pvc: PersistentVolumeClaim;
  readonly pv: PersistentVolume;
}

/** Something about a volume the user must fix; `reason` becomes the Event reason. */
export interface VolumeProblem {
  readonly reason:
    | "PersistentVolumeClaimNotFound"
    | "PersistentVolumeClaimUnbound"
    | "PersistentVolumeNotFound"
    | "PersistentVolumeMismatch";
  readonly message: string;
}

/** Result of {@link workloadVolumes}. */
export interface WorkloadVolumes {
  readonly volumes: WorkloadVolume[];
  readonly problems: VolumeProblem[];
}

/** Cache lookups used by {@link workloadVolumes}. */
export interface VolumeLookup {
  pvc(namespace: string, name: string): PersistentVolumeClaim | undefined;
  pv(name: string): PersistentVolume | undefined;
}

/** Names of the PVCs a pod mounts (`namespace/name`), for indexing pods by claim. */
export function claimKeys(pod: Pod): string[] {
  const ns = pod.metadata.namespace ?? "default";
  return (pod.spec.volumes ?? []).flatMap((
    v,
  ) => (v.persistentVolumeClaim ? [`${ns}/${v.persistentVolumeClaim.claimName}`] : []));
}

/**
 * Resolve the pod's PVC volumes. A PVC that is bound to a PV of another driver is silently
 * skipped; problems are only reported for claims whose PV cannot be determined or is ours but
 * inconsistent.
 */
export function workloadVolumes(pod: Pod, lookup: VolumeLookup): WorkloadVolumes {
  const ns = pod.metadata.namespace ?? "default";
  const volumes: WorkloadVolume[] = [];
  const problems: VolumeProblem[] = [];
  for (const v of pod.spec.volumes ?? []) {
    const claim = v.persistentVolumeClaim?.claimName;
    if (!claim) continue;
    const pvc = lookup.pvc(ns, claim);
    if (!pvc) {
      problems.push({
        reason: "PersistentVolumeClaimNotFound",
        message:
          `PersistentVolumeClaim "${ns}/${claim}" of volume "${v.name}" does not exist: create it or fix claimName`,
      });
      continue;
    }
    const pvName = pvc.spec.volumeName;
    if (pvc.status?.phase !== "Bound" || !pvName) {
      problems.push({
        reason: "PersistentVolumeClaimUnbound",
        message:
          `PersistentVolumeClaim "${ns}/${claim}" is not bound yet (phase ${
            pvc.status?.phase ?? "unknown"
          }): ` +
          `check that a matching PersistentVolume exists or that its StorageClass can provision one`,
      });
      continue;
    }
    const pv = lookup.pv(pvName);
    if (!pv) {
      problems.push({
        reason: "PersistentVolumeNotFound",
        message: `PersistentVolume "${pvName}" bound to claim "${ns}/${claim}" does not exist`,
      });
      continue;
    }
    if (pv.spec.csi?.driver !== DRIVER_NAME) continue;
    const ref = pv.spec.claimRef;
    if (!ref || ref.name !== claim || (ref.namespace && ref.namespace !== ns)) {
      problems.push({
        reason: "PersistentVolumeMismatch",
        message:
          `PersistentVolume "${pvName}" is claimed by "${ref?.namespace ?? "?"}/${
            ref?.name ?? "?"
          }", ` +
          `not by "${ns}/${claim}": fix spec.claimRef of the PersistentVolume`,
      });
      continue;
    }
    if (!pv.spec.csi.volumeHandle) {
      problems.push({
        reason: "PersistentVolumeMismatch",
        message:
          `PersistentVolume "${pvName}" of driver ${DRIVER_NAME} has no spec.csi.volumeHandle: set one`,
      });
      continue;
    }
    volumes.push({ pvc, pv });
  }
  return { volumes, problems };
}
