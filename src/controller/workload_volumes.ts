/**
 * Which of a workload Pod's volumes are ours: Pod → PVC → PV with `spec.csi.driver` equal to the
 * driver name, and the pod's own inline `csi:` volumes of the driver. Problems a user can fix
 * (PVC missing or unbound, PV missing or not bound back to the claim, an inline volume that may
 * not be mounted) are reported so the controller can raise an Event on the Pod and retry later.
 *
 * An inline volume is handled as the PersistentVolume it stands for ({@link inlineVolumePV}):
 * named after the pod's volume, with kubelet's per-pod handle, its attributes, its Secret in the
 * pod's namespace and its `mountOptions` attribute as mount options. The handle is unique to the
 * pod, so an inline volume never shares a Mountpoint Pod with another pod's.
 *
 * @module
 */
import type { PersistentVolume, PersistentVolumeClaim, Pod, PodVolume } from "../kube/types.ts";
import { VOLUME_CONTEXT } from "../csi/volume_context.ts";
import {
  inlineAuthenticationProblem,
  inlineAuthenticationSource,
  inlineVolumeHandle,
  splitMountOptions,
} from "../csi/inline_volume.ts";
import { DRIVER_NAME } from "../util/version.ts";

/** A volume of the workload served by this driver. */
export interface WorkloadVolume {
  /** The claim; undefined for an inline volume. */
  readonly pvc: PersistentVolumeClaim | undefined;
  /** The PV, or for an inline volume the one it stands for ({@link inlineVolumePV}). */
  readonly pv: PersistentVolume;
}

/** Something about a volume the user must fix; `reason` becomes the Event reason. */
export interface VolumeProblem {
  readonly reason:
    | "PersistentVolumeClaimNotFound"
    | "PersistentVolumeClaimUnbound"
    | "PersistentVolumeNotFound"
    | "PersistentVolumeMismatch"
    | "InvalidInlineVolume";
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
    if (v.csi?.driver === DRIVER_NAME) {
      const attrs = v.csi.volumeAttributes ?? {};
      const problem = inlineAuthenticationProblem(
        inlineAuthenticationSource(attrs[VOLUME_CONTEXT.authenticationSource]),
        v.csi.nodePublishSecretRef?.name !== undefined,
      );
      if (problem) {
        problems.push({
          reason: "InvalidInlineVolume",
          message: `Volume "${v.name}": ${problem}`,
        });
      } else if (pod.metadata.uid) {
        volumes.push({ pvc: undefined, pv: inlineVolumePV(pod, v) });
      }
      continue;
    }
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

/**
 * The PersistentVolume an inline volume of `pod` stands for: named after the pod's volume (as in
 * kubelet's target path), with kubelet's per-pod handle, the volume's attributes (its
 * authentication source made explicit: `secret` unless it names another), its Secret in the
 * pod's namespace, and its `mountOptions` attribute as mount options.
 */
export function inlineVolumePV(pod: Pod, volume: PodVolume): PersistentVolume {
  const csi = volume.csi!;
  const attrs = csi.volumeAttributes ?? {};
  const ref = csi.nodePublishSecretRef;
  return {
    metadata: { name: volume.name },
    spec: {
      csi: {
        driver: csi.driver,
        volumeHandle: inlineVolumeHandle(pod.metadata.uid ?? "", volume.name),
        volumeAttributes: {
          ...attrs,
          [VOLUME_CONTEXT.authenticationSource]: inlineAuthenticationSource(
            attrs[VOLUME_CONTEXT.authenticationSource],
          ),
        },
        ...(csi.readOnly ? { readOnly: true } : {}),
        ...(ref?.name
          ? {
            nodePublishSecretRef: {
              name: ref.name,
              namespace: pod.metadata.namespace ?? "default",
            },
          }
          : {}),
      },
      mountOptions: splitMountOptions(attrs[VOLUME_CONTEXT.mountOptions]),
    },
  };
}

/** The inline volume of `pod` that an attachment names (its volume name and handle), if any. */
export function inlineVolumeOf(
  pod: Pod,
  volumeName: string,
  volumeID: string,
): PersistentVolume | undefined {
  const v = (pod.spec.volumes ?? []).find((v) =>
    v.name === volumeName && v.csi?.driver === DRIVER_NAME
  );
  if (!v || !pod.metadata.uid || inlineVolumeHandle(pod.metadata.uid, v.name) !== volumeID) {
    return undefined;
  }
  return inlineVolumePV(pod, v);
}
