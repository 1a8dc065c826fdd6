/**
 * What the controller keeps of the objects it caches. At 10,000 workload pods the cache is most
 * of the controller's memory, and a pod as the API server sends it (managed fields, container
 * specs with defaults, tolerations, status) is many times what the reconciler reads. These
 * transforms run before an object enters an informer's cache (client-go's `SetTransform`).
 *
 * Kept of a pod: identity and lifecycle metadata, labels, the driver's own annotations, the node,
 * the PVC volumes, `fsGroup`, the phase and the PodScheduled condition — everything
 * `reconciler.ts`, `attachments.ts`, `sharing_key.ts`, `workload_volumes.ts` and
 * `stale_cleaner.ts` read. Other objects only lose `metadata.managedFields` (an update that
 * omits them leaves the server's unchanged).
 *
 * @module
 */
import type { KubeObject } from "../kube/client.ts";
import type { Pod } from "../kube/types.ts";
import { DRIVER_NAME } from "../util/version.ts";

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
  const volumes = (pod.spec?.volumes ?? []).filter((v) => v.persistentVolumeClaim).map((v) => ({
    name: v.name,
    persistentVolumeClaim: v.persistentVolumeClaim!,
  }));
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
      ...(fsGroup !== undefined && fsGroup !== null ? { securityContext: { fsGroup } } : {}),
    },
    status: {
      ...(pod.status?.phase ? { phase: pod.status.phase } : {}),
      ...(scheduled?.length ? { conditions: scheduled } : {}),
    },
  };
}
