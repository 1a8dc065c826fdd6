/**
 * What the controller keeps of the objects it caches. At 10,000 workload pods the cache is most
 * of the controller's memory, and a pod as the API server sends it (managed fields, container
 * specs with defaults, tolerations, status) is many times what the reconciler reads. These
 * transforms run before an object enters an informer's cache (client-go's `SetTransform`).
 *
 * Kept of a pod: identity and lifecycle metadata, labels, the driver's own annotations, the node,
 * the PVC volumes and the driver's inline `csi:` volumes, the ServiceAccount, `fsGroup`, the phase
 * and the PodScheduled condition — everything
 * `reconciler.ts`, `attachments.ts`, `sharing_key.ts`, `workload_volumes.ts` and
 * `stale_cleaner.ts` read. Other objects only lose `metadata.managedFields` (an update that
 * omits them leaves the server's unchanged).
 *
 * @module
 */
import type { KubeObject } from "../kube/client.ts";
import type { Pod, PodVolume, ServiceAccount } from "../kube/types.ts";
import { ANNOTATION_ROLE_ARN } from "../mppod/labels.ts";
import { DRIVER_NAME } from "../util/version.ts";

/**
 * The slice of a ServiceAccount the controller reads: identity and the role annotation of
 * `authenticationSource: pod` (nothing else: no secrets, no other annotations).
 */
export function slimServiceAccount(sa: ServiceAccount): ServiceAccount {
  const m = sa.metadata ?? {};
  const role = m.annotations?.[ANNOTATION_ROLE_ARN];
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      ...(role ? { annotations: { [ANNOTATION_ROLE_ARN]: role } } : {}),
    },
  };
}

/** `obj` without `metadata.managedFields`. */
export function withoutManagedFields<T extends KubeObject>(obj: T): T {
  if (!obj.metadata?.managedFields) return obj;
  const { managedFields: _, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

const OWN_ANNOTATION = `${DRIVER_NAME}/`;

/** The slice of a pod the controller reads. */
export function slimPod(pod: Pod): Pod {
  const m = pod.metadata ?? {};
  const annotations = Object.fromEntries(
    Object.entries(m.annotations ?? {}).filter(([k]) => k.startsWith(OWN_ANNOTATION)),
  );
  const volumes = (pod.spec?.volumes ?? []).flatMap((v): PodVolume[] =>
    v.persistentVolumeClaim
      ? [{ name: v.name, persistentVolumeClaim: v.persistentVolumeClaim }]
      : v.csi?.driver === DRIVER_NAME
      ? [{ name: v.name, csi: v.csi }]
      : []
  );
  const serviceAccount = pod.spec?.serviceAccountName;
  const fsGroup = pod.spec?.securityContext?.fsGroup;
  const scheduled = pod.status?.conditions?.filter((c) => c.type === "PodScheduled");
  return {
    ...(pod.apiVersion ? { apiVersion: pod.apiVersion } : {}),
    ...(pod.kind ? { kind: pod.kind } : {}),
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
      ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
      ...(m.labels ? { labels: m.labels } : {}),
      ...(Object.keys(annotations).length ? { annotations } : {}),
    },
    spec: {
      ...(pod.spec?.nodeName ? { nodeName: pod.spec.nodeName } : {}),
      containers: [],
      ...(volumes.length ? { volumes } : {}),
      ...(serviceAccount ? { serviceAccountName: serviceAccount } : {}),
      ...(fsGroup !== undefined && fsGroup !== null ? { securityContext: { fsGroup } } : {}),
    },
    status: {
      ...(pod.status?.phase ? { phase: pod.status.phase } : {}),
      ...(scheduled?.length ? { conditions: scheduled } : {}),
    },
  };
}
