/**
 * Cluster-level objects: namespaces, the S3PA CRD, the CSIDriver, the Mountpoint Pods'
 * PriorityClasses and PodDisruptionBudget, and the custom CA ConfigMaps.
 *
 * @module
 */
import { s3paCrd } from "../api/mountpoint_s3_pod_attachment.ts";
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT, LABEL_NEEDS_UNMOUNT } from "../mppod/labels.ts";
import { DRIVER_NAME } from "../util/version.ts";
import type { Manifest } from "./k8s_objects.ts";
import { commonLabels, MOUNTPOINT_PDB, SYSTEM_NAMESPACES } from "./names.ts";
import { type DeployValues, headroomOn } from "./values.ts";

/** PEM bundle key in the CA ConfigMaps (the controller mounts it into Mountpoint Pods). */
export const CA_BUNDLE_KEY = "ca-bundle.crt";

/** The driver namespace (unless it is a system one) and the Mountpoint namespace. */
export function renderNamespaces(v: DeployValues): Manifest[] {
  const out: Manifest[] = [];
  if (!SYSTEM_NAMESPACES.has(v.namespace) && v.namespace !== v.mountpointPod.namespace) {
    out.push({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: v.namespace, labels: commonLabels(v) },
    });
  }
  // Mountpoint Pods are built to pass the restricted Pod Security Standard, which the upstream
  // chart enforces on this namespace too.
  out.push({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name: v.mountpointPod.namespace,
      labels: {
        ...commonLabels(v, "mountpoint-pods"),
        name: v.mountpointPod.namespace,
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
      },
    },
  });
  return out;
}

/** The MountpointS3PodAttachment CRD, as `scripts/gen_crd.ts` renders it, plus our labels. */
export function renderCrd(v: DeployValues): Manifest {
  const crd = s3paCrd() as unknown as Manifest;
  return {
    ...crd,
    metadata: { ...crd.metadata, labels: { ...crd.metadata.labels, ...commonLabels(v) } },
  };
}

/**
 * CSIDriver: no attach, pod info on mount, persistent volumes and (unless
 * `csiDriver.inlineVolumes` is false) inline ones
 * (https://kubernetes-csi.github.io/docs/csi-driver-object.html).
 */
export function renderCsiDriver(v: DeployValues): Manifest {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIDriver",
    metadata: { name: DRIVER_NAME, labels: commonLabels(v) },
    spec: {
      attachRequired: false,
      podInfoOnMount: true,
      requiresRepublish: v.csiDriver.requiresRepublish,
      fsGroupPolicy: v.csiDriver.fsGroupPolicy,
      volumeLifecycleModes: v.csiDriver.inlineVolumes
        ? ["Persistent", "Ephemeral"]
        : ["Persistent"],
      ...(v.podIdentity.audience
        ? {
          tokenRequests: [{
            audience: v.podIdentity.audience,
            expirationSeconds: v.podIdentity.tokenExpirationSeconds,
          }],
        }
        : {}),
    },
  };
}

/**
 * PriorityClasses of Mountpoint Pods, with the values of the upstream chart's
 * `templates/mount-s3-priority.yaml` (`github.com/scality/mountpoint-s3-csi-driver`).
 */
export function renderPriorityClasses(v: DeployValues): Manifest[] {
  const pc = (
    name: string,
    value: number,
    preemptionPolicy: string,
    description: string,
  ): Manifest => ({
    apiVersion: "scheduling.k8s.io/v1",
    kind: "PriorityClass",
    metadata: { name, labels: commonLabels(v, "mountpoint-pods") },
    value,
    preemptionPolicy,
    globalDefault: false,
    description,
  });
  const m = v.mountpointPod;
  return [
    pc(
      m.priorityClassName,
      1_000_000_000,
      "Never",
      "Mountpoint Pods: scheduled next to their workload, never preempt",
    ),
    // Headroom only (the preempting class on Mountpoint Pods of workloads that reserved headroom).
    ...(headroomOn(v)
      ? [
        pc(
          m.preemptingPriorityClassName,
          999_999_999,
          "PreemptLowerPriority",
          "Mountpoint Pods of workloads that reserved headroom: they preempt its headroom pods",
        ),
        pc(
          m.headroomPriorityClassName,
          -10,
          "Never",
          "Headroom pods reserving room for a workload and its Mountpoint Pods",
        ),
      ]
      : []),
  ];
}

/**
 * More healthy pods than can ever exist: with an integer `minAvailable` the disruption controller
 * needs no owner with a scale subresource (Mountpoint Pods are owned by their Node), and no
 * eviction is ever allowed.
 */
export const NEVER_EVICT_MIN_AVAILABLE = 2_147_483_647;

/**
 * The PodDisruptionBudget of Mountpoint Pods in use: it selects every Mountpoint Pod without the
 * `needs-unmount` label (the controller sets it when the last workload leaves) and allows no
 * eviction. `kubectl drain` then evicts the workloads, retries the Mountpoint Pods ("Cannot evict
 * pod as it would violate the pod's disruption budget") until they are released — unmounted
 * cleanly, Succeeded, deleted — or, once labelled, evictable. The eviction API ignores budgets for
 * Pending and finished pods, so a Mountpoint Pod that never started does not hold a drain; a
 * running one that is not Ready stays protected (`IfHealthyBudget`): it may still serve mounts.
 */
export function renderMountpointDisruptionBudget(v: DeployValues): Manifest[] {
  if (!v.mountpointPod.disruptionBudget) return [];
  return [{
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata: {
      name: MOUNTPOINT_PDB,
      namespace: v.mountpointPod.namespace,
      labels: commonLabels(v, "mountpoint-pods"),
    },
    spec: {
      minAvailable: NEVER_EVICT_MIN_AVAILABLE,
      selector: {
        matchLabels: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
        matchExpressions: [{ key: LABEL_NEEDS_UNMOUNT, operator: "DoesNotExist" }],
      },
      unhealthyPodEvictionPolicy: "IfHealthyBudget",
    },
  }];
}

/** CA ConfigMaps in the driver and Mountpoint namespaces, when the PEM data is in the values. */
export function renderCaConfigMaps(v: DeployValues): Manifest[] {
  if (!v.tls.caCertData) return [];
  const namespaces = [...new Set([v.namespace, v.mountpointPod.namespace])];
  return namespaces.map((namespace) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: v.tls.caCertConfigMap, namespace, labels: commonLabels(v) },
    data: { [CA_BUNDLE_KEY]: v.tls.caCertData },
  }));
}
