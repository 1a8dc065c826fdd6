/**
 * The Kubernetes API resources this project reads and writes, and how their REST paths are built.
 * Our own CRD's resource (`S3PAS`) is declared beside its type in `src/api/`.
 *
 * @module
 */

/** A REST resource type. */
export interface Resource {
  /** API group; "" for the core group. */
  readonly group: string;
  readonly version: string;
  /** Plural resource name, the URL segment. */
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

/** `apiVersion` of a resource's objects. */
export function apiVersionOf(r: Resource): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}

/** Collection path; `namespace` undefined on a namespaced resource means all namespaces. */
export function collectionPath(r: Resource, namespace?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  if (r.namespaced && namespace) {
    return `${base}/namespaces/${encodeURIComponent(namespace)}/${r.plural}`;
  }
  return `${base}/${r.plural}`;
}

/** Item path. */
export function itemPath(
  r: Resource,
  name: string,
  namespace?: string,
  subresource?: string,
): string {
  if (r.namespaced && !namespace) throw new Error(`${r.kind} "${name}" needs a namespace`);
  const path = `${collectionPath(r, namespace)}/${encodeURIComponent(name)}`;
  return subresource ? `${path}/${subresource}` : path;
}

const core = (plural: string, kind: string, namespaced: boolean): Resource => ({
  group: "",
  version: "v1",
  plural,
  kind,
  namespaced,
});

/** Pods. */
export const PODS = core("pods", "Pod", true);
/** PersistentVolumes. */
export const PVS = core("persistentvolumes", "PersistentVolume", false);
/** PersistentVolumeClaims. */
export const PVCS = core("persistentvolumeclaims", "PersistentVolumeClaim", true);
/** Nodes. */
export const NODES = core("nodes", "Node", false);
/** Secrets. */
export const SECRETS = core("secrets", "Secret", true);
/** Namespaces. */
export const NAMESPACES = core("namespaces", "Namespace", false);
/** core/v1 Events. */
export const EVENTS = core("events", "Event", true);
/** Leases (leader election). */
export const LEASES: Resource = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  kind: "Lease",
  namespaced: true,
};
/** StorageClasses. */
export const STORAGE_CLASSES: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "storageclasses",
  kind: "StorageClass",
  namespaced: false,
};
/** ServiceAccounts. */
export const SERVICE_ACCOUNTS = core("serviceaccounts", "ServiceAccount", true);
/** CustomResourceDefinitions. */
export const CRDS: Resource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
};
/** PriorityClasses. */
export const PRIORITY_CLASSES: Resource = {
  group: "scheduling.k8s.io",
  version: "v1",
  plural: "priorityclasses",
  kind: "PriorityClass",
  namespaced: false,
};
/** ConfigMaps. */
export const CONFIGMAPS = core("configmaps", "ConfigMap", true);
/** Services. */
export const SERVICES = core("services", "Service", true);
/** CSIDrivers. */
export const CSI_DRIVERS: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "csidrivers",
  kind: "CSIDriver",
  namespaced: false,
};
/** CSINodes. */
export const CSI_NODES: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "csinodes",
  kind: "CSINode",
  namespaced: false,
};
const rbac = (plural: string, kind: string, namespaced: boolean): Resource => ({
  group: "rbac.authorization.k8s.io",
  version: "v1",
  plural,
  kind,
  namespaced,
});
/** ClusterRoles. */
export const CLUSTER_ROLES = rbac("clusterroles", "ClusterRole", false);
/** ClusterRoleBindings. */
export const CLUSTER_ROLE_BINDINGS = rbac("clusterrolebindings", "ClusterRoleBinding", false);
/** Roles. */
export const ROLES = rbac("roles", "Role", true);
/** RoleBindings. */
export const ROLE_BINDINGS = rbac("rolebindings", "RoleBinding", true);
const admission = (plural: string, kind: string): Resource => ({
  group: "admissionregistration.k8s.io",
  version: "v1",
  plural,
  kind,
  namespaced: false,
});
/** ValidatingAdmissionPolicies (CEL admission rules, GA in Kubernetes 1.30). */
export const VALIDATING_ADMISSION_POLICIES = admission(
  "validatingadmissionpolicies",
  "ValidatingAdmissionPolicy",
);
/** ValidatingAdmissionPolicyBindings. */
export const VALIDATING_ADMISSION_POLICY_BINDINGS = admission(
  "validatingadmissionpolicybindings",
  "ValidatingAdmissionPolicyBinding",
);
/** PodDisruptionBudgets. */
export const POD_DISRUPTION_BUDGETS: Resource = {
  group: "policy",
  version: "v1",
  plural: "poddisruptionbudgets",
  kind: "PodDisruptionBudget",
  namespaced: true,
};
/** Deployments. */
export const DEPLOYMENTS: Resource = {
  group: "apps",
  version: "v1",
  plural: "deployments",
  kind: "Deployment",
  namespaced: true,
};
/** DaemonSets. */
export const DAEMONSETS: Resource = {
  group: "apps",
  version: "v1",
  plural: "daemonsets",
  kind: "DaemonSet",
  namespaced: true,
};
