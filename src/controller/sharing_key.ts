/**
 * The sharing key of a workload volume: workloads with equal keys share one Mountpoint Pod.
 *
 * Key = node, PV name, volume handle, PV mount options (joined with ","), workload fsGroup,
 * authentication source, the nodePublishSecretRef when the PV has one (required for `secret`),
 * driver version, and the volume's local cache when it has one (PV attributes `cache*` or the
 * `cache` mount option).
 *
 * The Secret's reference stands for its content, which the controller does not read (it has no
 * access to Secrets): credentials, and the volume's own `endpoint`/`region`. Volumes with
 * different Secrets, hence possibly different endpoints, never share a Mountpoint Pod; a change
 * to a Secret's content applies to Mountpoint Pods made after it.
 *
 * @module
 */
import type { AuthenticationSource, S3paSpec } from "../api/mountpoint_s3_pod_attachment.ts";
import type { SharingKey } from "../mppod/naming.ts";
import type { PersistentVolume, Pod } from "../kube/types.ts";
import { LABEL_DRIVER_VERSION } from "../mppod/labels.ts";
import { cacheKey } from "../mppod/cache_volume.ts";
import { MountpointPodSpecError, pvCache } from "../mppod/pod_spec.ts";

/** PV volume attribute selecting the authentication source. */
export const AUTHENTICATION_SOURCE_ATTRIBUTE = "authenticationSource";

/** An invalid `authenticationSource` attribute. */
export class SharingKeyError extends Error {
  override name = "SharingKeyError";
}

/** The authentication source a PV asks for. @throws {SharingKeyError} */
export function authenticationSource(pv: PersistentVolume): AuthenticationSource {
  const raw = pv.spec.csi?.volumeAttributes?.[AUTHENTICATION_SOURCE_ATTRIBUTE] ?? "";
  if (raw === "" || raw === "driver") return "driver";
  if (raw === "secret") return "secret";
  throw new SharingKeyError(
    `PV "${pv.metadata.name}" has volume attribute authenticationSource="${raw}": use "driver" or "secret"`,
  );
}

/** Build the key of `pod` using `pv`. @throws {SharingKeyError} */
export function sharingKey(pod: Pod, pv: PersistentVolume, driverVersion: string): SharingKey {
  const auth = authenticationSource(pv);
  const fsGroup = pod.spec.securityContext?.fsGroup;
  let cache: string;
  try {
    cache = cacheKey(pvCache(pv.spec.csi?.volumeAttributes ?? {}, pv.spec.mountOptions ?? []));
  } catch (err) {
    if (err instanceof MountpointPodSpecError) {
      throw new SharingKeyError(`PV "${pv.metadata.name}": ${err.message}`);
    }
    throw err;
  }
  const key: SharingKey = {
    nodeName: pod.spec.nodeName ?? "",
    persistentVolumeName: pv.metadata.name ?? "",
    volumeID: pv.spec.csi?.volumeHandle ?? "",
    mountOptions: (pv.spec.mountOptions ?? []).join(","),
    workloadFSGroup: fsGroup === undefined || fsGroup === null ? "" : String(fsGroup),
    authenticationSource: auth,
    driverVersion,
    ...(cache ? { cache } : {}),
  };
  const ref = pv.spec.csi?.nodePublishSecretRef;
  if (auth === "secret" && !ref?.name) {
    throw new SharingKeyError(
      `PV "${pv.metadata.name}" uses authenticationSource=secret but has no spec.csi.nodePublishSecretRef: add one`,
    );
  }
  return ref?.name ? { ...key, secretNamespace: ref.namespace ?? "", secretName: ref.name } : key;
}

/** The key an existing S3PA stands for (its spec plus its driver-version label). */
export function keyOfAttachment(
  spec: S3paSpec,
  labels: Readonly<Record<string, string>> | undefined,
): SharingKey {
  const { mountpointS3PodAttachments: _, ...rest } = spec;
  return { ...rest, driverVersion: labels?.[LABEL_DRIVER_VERSION] ?? "" };
}

/** The S3PA spec fields of a key (without the driver version, which is a label). */
export function specOfKey(key: SharingKey): Omit<S3paSpec, "mountpointS3PodAttachments"> {
  const { driverVersion: _, ...spec } = key;
  return spec;
}
