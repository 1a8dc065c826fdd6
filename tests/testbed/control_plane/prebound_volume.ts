/**
 * A statically provisioned volume of the driver, pre-bound both ways (the PV's `claimRef` names the
 * claim, the claim's `volumeName` names the PV), as the controller tests and the controller
 * benchmark create them: kube-controller-manager's PV binder then only completes the binding, and
 * on the emulator (no binder) the caller marks the claim Bound itself.
 *
 * @module
 */
import type { PersistentVolume, PersistentVolumeClaim } from "../../../src/kube/types.ts";
import { DRIVER_NAME } from "../../../src/util/version.ts";

/** Settings of {@link preboundPv}. */
export interface PreboundPvOptions {
  /** `volumeAttributes.bucketName`. @default "b" */
  readonly bucket?: string;
  /** `csi.volumeHandle`. @default the PV name */
  readonly volumeHandle?: string;
  /** `spec.mountOptions` (none when absent). */
  readonly mountOptions?: readonly string[];
}

/** The PV `pv` of 1Gi, ReadWriteMany, reserved for claim `claim` in `namespace`. */
export function preboundPv(
  pv: string,
  claim: { readonly name: string; readonly namespace: string },
  o: PreboundPvOptions = {},
): PersistentVolume {
  return {
    metadata: { name: pv },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteMany"],
      ...(o.mountOptions ? { mountOptions: [...o.mountOptions] } : {}),
      csi: {
        driver: DRIVER_NAME,
        volumeHandle: o.volumeHandle ?? pv,
        volumeAttributes: { bucketName: o.bucket ?? "b" },
      },
      claimRef: { name: claim.name, namespace: claim.namespace },
      storageClassName: "",
    },
  };
}

/** The claim `name` in `namespace` of 1Gi, ReadWriteMany, naming PV `pv` (unbound when absent). */
export function preboundClaim(
  name: string,
  namespace: string,
  pv: string | undefined,
): PersistentVolumeClaim {
  return {
    metadata: { name, namespace },
    spec: {
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "",
      ...(pv === undefined ? {} : { volumeName: pv }),
    },
  };
}
