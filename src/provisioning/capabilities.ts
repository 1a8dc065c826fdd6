/**
 * Volume capabilities and capacity of CreateVolume/ValidateVolumeCapabilities. S3 volumes are file
 * systems (no block), without a file system type, in every access mode the node plugin can publish
 * (`SUPPORTED_ACCESS_MODES` of `src/csi/access_modes.ts`). Capacity is echoed: S3 has no quota.
 *
 * @module
 */
import { invalidArgument } from "../csi/errors.ts";
import type { CapacityRange, VolumeCapability } from "../csi/gen/csi_types.ts";
import { SUPPORTED_ACCESS_MODES } from "../csi/access_modes.ts";

/** Why `caps` cannot be served, or undefined. */
export function capabilitiesProblem(
  caps: readonly VolumeCapability[] | null | undefined,
): string | undefined {
  if (!caps || caps.length === 0) {
    return "Volume capabilities not provided: at least one access mode is needed";
  }
  for (const cap of caps) {
    if (cap.block || cap.accessType === "block") {
      return "Block volumes are not supported: S3 volumes are file systems (use volumeMode: Filesystem)";
    }
    const fsType = cap.mount?.fsType ?? "";
    if (fsType !== "") {
      return `File system type "${fsType}" is not supported: S3 volumes have none; remove csi.storage.k8s.io/fstype from the StorageClass`;
    }
    const mode = cap.accessMode?.mode ?? "UNKNOWN";
    if (!SUPPORTED_ACCESS_MODES.includes(mode)) {
      return `Access mode ${mode} is not supported; use ReadWriteMany, ReadOnlyMany, ReadWriteOnce or ReadWriteOncePod (CSI ${
        SUPPORTED_ACCESS_MODES.join(", ")
      })`;
    }
  }
  return undefined;
}

/** Check CreateVolume's capabilities. @throws {CsiError} InvalidArgument */
export function checkCapabilities(caps: readonly VolumeCapability[] | null | undefined): void {
  const problem = capabilitiesProblem(caps);
  if (problem) throw invalidArgument(problem);
}

/**
 * The capacity to report: the required bytes, else the limit, else 0 (unknown: csi-provisioner
 * then gives the PV the requested size).
 * @throws {CsiError} InvalidArgument when the range is inconsistent
 */
export function requestedCapacity(range: CapacityRange | null | undefined): number {
  const required = Number(range?.requiredBytes ?? 0);
  const limit = Number(range?.limitBytes ?? 0);
  if (required < 0 || limit < 0) throw invalidArgument("Capacity must not be negative");
  if (limit > 0 && required > limit) {
    throw invalidArgument(
      `Required capacity ${required} is larger than the limit ${limit}`,
    );
  }
  return required > 0 ? required : limit;
}
