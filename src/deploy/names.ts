/**
 * Object names and labels of the deployment. Workload and ServiceAccount names are those of the
 * upstream Helm chart (`charts/scality-mountpoint-s3-csi-driver/` in
 * `github.com/scality/mountpoint-s3-csi-driver`), so its debugging commands
 * (`deployment/s3-csi-controller`, `daemonset/s3-csi-node`) work unchanged.
 *
 * @module
 */
import { DRIVER_NAME } from "../util/version.ts";
import type { DeployValues } from "./values.ts";

/** Node DaemonSet. */
export const NODE_DAEMONSET = "s3-csi-node";
/** Controller Deployment; also the name of its leader Lease. */
export const CONTROLLER_DEPLOYMENT = "s3-csi-controller";
/** ServiceAccount of the node plugin. */
export const NODE_SERVICE_ACCOUNT = "s3-csi-driver-sa";
/** ServiceAccount of the controller (the reconciler). */
export const CONTROLLER_SERVICE_ACCOUNT = "s3-csi-driver-controller-sa";
/** Deployment of dynamic provisioning: csi-provisioner and the driver's CSI Controller service. */
export const PROVISIONER_DEPLOYMENT = "s3-csi-provisioner";
/** ServiceAccount of the csi-provisioner sidecar (the only container of its pod with a token). */
export const PROVISIONER_SERVICE_ACCOUNT = "s3-csi-driver-provisioner-sa";
/** Headless Service selecting the Mountpoint Pods' metrics ports (in the Mountpoint namespace). */
export const MOUNTPOINT_METRICS_SERVICE = "s3-csi-mountpoint-metrics";
/** ValidatingAdmissionPolicy (and its binding) that limits the node plugin to its own Node. */
export const NODE_POLICY = "s3-csi-node-restriction";
/** ValidatingAdmissionPolicy (and binding): only the controller creates Mountpoint Pods. */
export const MOUNTPOINT_POD_POLICY = "s3-csi-mountpoint-pod-creation";
/** ValidatingAdmissionPolicy (and binding): the Mountpoint PriorityClasses only for the driver. */
export const PRIORITY_CLASS_POLICY = "s3-csi-mountpoint-priority-classes";
/** ValidatingAdmissionPolicy (and binding) refusing PersistentVolumes the node plugin would refuse. */
export const VOLUME_POLICY = "s3-csi-volumes";
/** ValidatingAdmissionPolicy (and binding) refusing StorageClasses the provisioner would refuse. */
export const STORAGE_CLASS_POLICY = "s3-csi-storageclasses";
/** Admission policy narrowing the controller's pod patches (headroom). */
export const CONTROLLER_POLICY = "s3-csi-controller-restriction";
/** PodDisruptionBudget of the Mountpoint Pods in use (in the Mountpoint namespace). */
export const MOUNTPOINT_PDB = "s3-csi-mountpoint-pods";
/** Lease the csi-provisioner sidecar takes (its driver name with `.`/`/` replaced by `-`). */
export const PROVISIONER_LEASE: string = DRIVER_NAME.replace(/[./]/g, "-");
/** Field manager of `deno task deploy`. */
export const FIELD_MANAGER = "s3-csi-deploy";
/** Label on every object the deployment renders; undeploy and status select on it. */
export const LABEL_PART_OF = "app.kubernetes.io/part-of";
/** Value of {@link LABEL_PART_OF}. */
export const PART_OF = "s3-csi-driver";
/** Annotation on RBAC objects naming the component whose calls they allow. */
export const ANNOTATION_RBAC_FOR = `${DRIVER_NAME}/rbac-for`;
/** Namespaces that exist in every cluster: never rendered as objects, never deleted. */
export const SYSTEM_NAMESPACES: ReadonlySet<string> = new Set([
  "kube-system",
  "kube-public",
  "default",
  "kube-node-lease",
]);

/** Labels of every object: standard ones plus the user's `customLabels`. */
export function commonLabels(v: DeployValues, component?: string): Record<string, string> {
  return {
    ...v.customLabels,
    "app.kubernetes.io/name": "s3-csi-driver",
    [LABEL_PART_OF]: PART_OF,
    "app.kubernetes.io/managed-by": FIELD_MANAGER,
    "app.kubernetes.io/version": v.version,
    ...(component ? { "app.kubernetes.io/component": component } : {}),
  };
}
