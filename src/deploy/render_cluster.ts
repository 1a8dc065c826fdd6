/**
 * Cluster-level objects: namespaces, the S3PA CRD, the CSIDriver, the Mountpoint Pods'
 * PriorityClasses and the custom CA ConfigMaps.
 *
 * @module
 */
import { s3paCrd } from "../api/mountpoint_s3_pod_attachment.ts";
import { DRIVER_NAME } from "../util/version.ts";
import type { Manifest } from "./k8s_objects.ts";
import { commonLabels, SYSTEM_NAMESPACES } from "./names.ts";
import type { DeployValues } from "./values.ts";

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
    ...(m.preemptingPriorityClassName
      ? [pc(
        m.preemptingPriorityClassName,
        999_999_999,
        "PreemptLowerPriority",
        "Mountpoint Pods that may preempt (headroom mode)",
      )]
      : []),
    ...(m.headroomPriorityClassName
      ? [
        pc(
          m.headroomPriorityClassName,
          -10,
          "Never",
          "Headroom pods reserving room for Mountpoint Pods",
        ),
      ]
      : []),
  ];
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
