/**
 * What the controller keeps of the objects it caches. At 10,000 workload pods the cache is most
 * of the controller's memory, and a pod as the API server sends it (managed fields, container
 * specs with defaults, tolerations, status) is many times what the reconciler reads. These
 * transforms run before an object enters an informer's cache (client-go's `SetTransform`).
 *
 * Kept of a pod: identity and lifecycle metadata, labels, the driver's own annotations, the node,
 * the PVC volumes and the driver's inline `csi:` volumes, the ServiceAccount, `fsGroup`, the
 * tolerations of `NoExecute` taints (normalized), the priority and preemption policy, the phase and
 * the PodScheduled condition — and, while a workload waits for the headroom scheduling gate, what
 * the headroom flow copies (gates, node selector and affinity, every toleration, requests) —
 * everything
 * `reconciler.ts`, `attachments.ts`, `sharing_key.ts`, `workload_volumes.ts` and
 * `stale_cleaner.ts` read. Nodes keep their name and UID (the Mountpoint Pods' owner). Other
 * objects only lose `metadata.managedFields` (an update that omits them leaves the server's
 * unchanged).
 *
 * @module
 */
import type { KubeObject } from "../kube/client.ts";
import type { Pod, PodVolume, ServiceAccount } from "../kube/types.ts";
import { ANNOTATION_ROLE_ARN } from "../mppod/labels.ts";
import { DRIVER_NAME } from "../util/version.ts";
import { executeTolerations } from "../mppod/tolerations.ts";
import { hasHeadroomGate } from "./headroom_pods.ts";

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
  const gated = pod.spec ? hasHeadroomGate(pod) : false;
  const tolerations = gated
    ? pod.spec.tolerations ?? []
    : executeTolerations(pod.spec?.tolerations);
  const spec = pod.spec ?? { containers: [] };
  const resources = (c: { name: string; resources?: unknown; restartPolicy?: unknown }) => ({
    name: c.name,
    ...(c.resources ? { resources: c.resources } : {}),
    ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
  });
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
      ...(spec.nodeName ? { nodeName: spec.nodeName } : {}),
      containers: gated ? (spec.containers ?? []).map(resources) : [],
      ...(volumes.length ? { volumes } : {}),
      ...(serviceAccount ? { serviceAccountName: serviceAccount } : {}),
      ...(fsGroup !== undefined && fsGroup !== null ? { securityContext: { fsGroup } } : {}),
      ...(tolerations.length ? { tolerations } : {}),
      ...(spec.priority !== undefined ? { priority: spec.priority } : {}),
      ...(spec.preemptionPolicy ? { preemptionPolicy: spec.preemptionPolicy } : {}),
      ...(gated
        ? {
          schedulingGates: spec.schedulingGates,
          ...(spec.initContainers ? { initContainers: spec.initContainers.map(resources) } : {}),
          ...(spec.nodeSelector ? { nodeSelector: spec.nodeSelector } : {}),
          ...(spec.affinity ? { affinity: spec.affinity } : {}),
          ...(spec.overhead ? { overhead: spec.overhead } : {}),
        }
        : {}),
    },
    status: {
      ...(pod.status?.phase ? { phase: pod.status.phase } : {}),
      ...(scheduled?.length ? { conditions: scheduled } : {}),
    },
  };
}

/** The slice of a Node the controller reads: its name and UID. */
export function slimNode(node: KubeObject): KubeObject {
  const m = node.metadata ?? {};
  return {
    ...(node.apiVersion ? { apiVersion: node.apiVersion } : {}),
    ...(node.kind ? { kind: node.kind } : {}),
    metadata: { name: m.name, uid: m.uid, resourceVersion: m.resourceVersion },
  };
}
