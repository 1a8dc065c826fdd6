/**
 * The sharing key of a workload volume: workloads with equal keys share one Mountpoint Pod.
 *
 * Key = node, PV name, volume handle, PV mount options (joined with ","), workload fsGroup,
 * authentication source, the nodePublishSecretRef when the PV has one (required for `secret`),
 * driver version, the volume's local cache when it has one (PV attributes `cache*` or the
 * `cache` mount option), and with `pod` authentication the workload's namespace, ServiceAccount
 * and role (the PV's `roleArn` attribute, else the ServiceAccount's `s3.csi.scality.com/role-arn`
 * annotation): workloads of different ServiceAccounts never share a Mountpoint Pod.
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
import { ANNOTATION_ROLE_ARN, LABEL_DRIVER_VERSION } from "../mppod/labels.ts";
import { VOLUME_CONTEXT } from "../csi/volume_context.ts";
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
  if (raw === "secret" || raw === "pod") return raw;
  throw new SharingKeyError(
    `PV "${pv.metadata.name}" has volume attribute authenticationSource="${raw}": use "driver", "secret" or "pod"`,
  );
}

/** An IAM role ARN (`arn:<partition>:iam::<account or tenant>:role/<path/name>`). */
const ROLE_ARN_REGEXP = /^arn:[a-z-]*:iam::[^:\s]*:role\/[\w+=,.@/-]{1,512}$/;

/** Reads the annotations of a workload's ServiceAccount (the controller's cache). */
export type ServiceAccountLookup = (
  namespace: string,
  name: string,
) => Readonly<Record<string, string>> | undefined;

/**
 * The workload identity of `pod` authentication: namespace, ServiceAccount and role (the PV's
 * `roleArn` attribute, else the ServiceAccount's annotation). @throws {SharingKeyError}
 */
function podIdentity(
  pod: Pod,
  pv: PersistentVolume,
  serviceAccount: ServiceAccountLookup,
): Pick<
  SharingKey,
  "workloadNamespace" | "workloadServiceAccountName" | "workloadServiceAccountIAMRoleARN"
> {
  const namespace = pod.metadata.namespace ?? "default";
  const name = pod.spec.serviceAccountName || "default";
  const fromVolume = pv.spec.csi?.volumeAttributes?.[VOLUME_CONTEXT.roleArn];
  const role = fromVolume || serviceAccount(namespace, name)?.[ANNOTATION_ROLE_ARN];
  if (!role) {
    throw new SharingKeyError(
      `PV "${pv.metadata.name}" uses authenticationSource=pod but no role is named: set the volume attribute ${VOLUME_CONTEXT.roleArn}, or annotate ServiceAccount ${namespace}/${name} with ${ANNOTATION_ROLE_ARN}: <role ARN>`,
    );
  }
  if (!ROLE_ARN_REGEXP.test(role)) {
    throw new SharingKeyError(
      `Role "${role.slice(0, 100)}" (${
        fromVolume
          ? `volume attribute ${VOLUME_CONTEXT.roleArn} of PV "${pv.metadata.name}"`
          : `annotation ${ANNOTATION_ROLE_ARN} of ServiceAccount ${namespace}/${name}`
      }) is not a role ARN such as arn:aws:iam::123456789012:role/reader`,
    );
  }
  return {
    workloadNamespace: namespace,
    workloadServiceAccountName: name,
    workloadServiceAccountIAMRoleARN: role,
  };
}

/**
 * Build the key of `pod` using `pv`; `serviceAccount` reads the workload's ServiceAccount for
 * `pod` authentication. @throws {SharingKeyError}
 */
export function sharingKey(
  pod: Pod,
  pv: PersistentVolume,
  driverVersion: string,
  serviceAccount: ServiceAccountLookup = () => undefined,
): SharingKey {
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
    ...(auth === "pod" ? podIdentity(pod, pv, serviceAccount) : {}),
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
