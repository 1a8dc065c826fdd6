/**
 * ServiceAccounts and least-privilege RBAC, one permission table per component and one
 * ServiceAccount per component (ADR 0010): the node plugin, the controller (reconciler) and the
 * csi-provisioner sidecar. Each entry says where it applies (cluster-wide, the Mountpoint
 * namespace or the driver namespace) and why. The node plugin's Node patch is narrowed further by
 * an admission policy (`render_node_policy.ts`).
 *
 * The node and controller tables are checked against the calls their code makes
 * (`tests/deploy/rbac_test.ts` scans each binary's reachable source); the csi-provisioner table is
 * the sidecar's own RBAC (`deploy/kubernetes/rbac.yaml` in
 * `github.com/kubernetes-csi/external-provisioner`) trimmed to what a driver without topology,
 * attach, snapshots or capacity tracking uses.
 *
 * @module
 */
import { GROUP } from "../api/group_version.ts";
import { S3PA_PLURAL } from "../api/mountpoint_s3_pod_attachment.ts";
import type { Manifest, PolicyRule } from "./k8s_objects.ts";
import {
  ANNOTATION_RBAC_FOR,
  commonLabels,
  CONTROLLER_DEPLOYMENT,
  CONTROLLER_SERVICE_ACCOUNT,
  NODE_SERVICE_ACCOUNT,
  PROVISIONER_LEASE,
  PROVISIONER_SERVICE_ACCOUNT,
} from "./names.ts";
import { type DeployValues, headroomOn } from "./values.ts";

/** Where a permission applies. */
export type PermissionScope = "cluster" | "mountpoint-namespace" | "driver-namespace";

/** One grant. */
export interface Permission {
  /** API group ("" for core). */
  readonly group: string;
  /** Resource (plural, optionally `/subresource`). */
  readonly resource: string;
  /** Allowed verbs. */
  readonly verbs: readonly string[];
  /** Where the grant applies. */
  readonly scope: PermissionScope;
  /** Restrict to these object names. */
  readonly resourceNames?: readonly string[];
  /** Why the component needs it (shown in the rendered rule's comment-free YAML via the ADR). */
  readonly why: string;
  /** Granted only when headroom is on (`mountpointPod.*` headroom values). */
  readonly headroomOnly?: true;
}

/** Components that get RBAC. */
export type RbacComponent = "node" | "controller" | "provisioner";

/** Node plugin: watch its attachments and Mountpoint Pods, remove its node's startup taint. */
export const NODE_PERMISSIONS: readonly Permission[] = [
  {
    group: GROUP,
    resource: S3PA_PLURAL,
    verbs: ["list", "watch"],
    scope: "cluster",
    why: "informer of this node's attachments (field selector spec.nodeName)",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["get", "list", "watch", "patch"],
    scope: "mountpoint-namespace",
    why:
      "informer of the Mountpoint Pods on this node; get: read a pod fresh before its restarted container gets its FUSE connection again; patch: mark one it gave up on broken (annotation), for the controller to tell its workloads and replace it",
  },
  {
    group: "",
    resource: "nodes",
    verbs: ["get", "patch"],
    scope: "cluster",
    why:
      "remove the agent-not-ready taint from its own node (the admission policy s3-csi-node-restriction allows nothing else)",
  },
];

/** Controller: reconcile attachments into Mountpoint Pods, record events, hold the leader Lease. */
export const CONTROLLER_PERMISSIONS: readonly Permission[] = [
  {
    group: GROUP,
    resource: S3PA_PLURAL,
    verbs: ["create", "delete", "get", "list", "update", "watch"],
    scope: "cluster",
    why: "attachments are cluster-scoped; the controller owns their lifecycle",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["list", "watch"],
    scope: "cluster",
    why: "informer of workload pods (any namespace) that use S3 volumes",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["create", "delete", "patch"],
    scope: "mountpoint-namespace",
    why: "Mountpoint Pods are created, annotated and deleted only in their namespace",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["patch"],
    scope: "cluster",
    headroomOnly: true,
    why:
      "headroom: pin a workload that opted in (scheduling gate) to its reserved node and remove the gate; the admission policy s3-csi-controller-restriction allows nothing else",
  },
  {
    group: "",
    resource: "persistentvolumeclaims",
    verbs: ["list", "watch"],
    scope: "cluster",
    why: "informer: workload volume → PV",
  },
  {
    group: "",
    resource: "nodes",
    verbs: ["get", "list", "watch"],
    scope: "cluster",
    why:
      "the Node's UID: Mountpoint Pods are owned by their Node (kubectl drain sees them managed)",
  },
  {
    group: "",
    resource: "persistentvolumes",
    verbs: ["list", "watch"],
    scope: "cluster",
    why: "informer: volume attributes of S3 PVs",
  },
  {
    group: "",
    resource: "serviceaccounts",
    verbs: ["list", "watch"],
    scope: "cluster",
    why:
      "informer: the role annotation of workloads' ServiceAccounts (authenticationSource: pod); only that annotation is kept",
  },
  {
    group: "",
    resource: "events",
    verbs: ["create", "patch"],
    scope: "cluster",
    why: "events on workload pods (any namespace); patch aggregates repeats",
  },
  {
    group: "coordination.k8s.io",
    resource: "leases",
    verbs: ["create"],
    scope: "driver-namespace",
    why: "leader election: first start creates the Lease (create cannot be limited by name)",
  },
  {
    group: "coordination.k8s.io",
    resource: "leases",
    verbs: ["get", "update"],
    scope: "driver-namespace",
    resourceNames: [CONTROLLER_DEPLOYMENT],
    why: "leader election: read and renew its own Lease",
  },
];

/**
 * csi-provisioner v5.3 (its `deploy/kubernetes/rbac.yaml`, trimmed as above): PV lifecycle, PVC
 * binding, events, leader Lease.
 */
export const PROVISIONER_PERMISSIONS: readonly Permission[] = [
  {
    group: "",
    resource: "persistentvolumes",
    verbs: ["create", "delete", "get", "list", "patch", "watch"],
    scope: "cluster",
    why: "create/delete PVs; patch the finalizer (v5.0+)",
  },
  {
    group: "",
    resource: "persistentvolumeclaims",
    verbs: ["get", "list", "update", "watch"],
    scope: "cluster",
    why: "PVC informer; update the claim",
  },
  {
    group: "storage.k8s.io",
    resource: "storageclasses",
    verbs: ["get", "list", "watch"],
    scope: "cluster",
    why: "parameters and secrets of the class",
  },
  {
    group: "",
    resource: "events",
    verbs: ["create", "list", "patch", "update", "watch"],
    scope: "cluster",
    why: "Provisioning/ProvisioningSucceeded/ProvisioningFailed events on PVCs",
  },
  {
    group: "",
    resource: "secrets",
    verbs: ["get"],
    scope: "cluster",
    why: "provisioner/deleter secrets named by the StorageClass (any namespace, templated)",
  },
  {
    group: "",
    resource: "nodes",
    verbs: ["get"],
    scope: "cluster",
    why: "v5 GETs the selected node of WaitForFirstConsumer claims",
  },
  {
    group: "coordination.k8s.io",
    resource: "leases",
    verbs: ["create", "get", "list", "update", "watch", "delete"],
    scope: "driver-namespace",
    why: "leader election (csi-lib-utils)",
  },
];

function rules(perms: readonly Permission[]): PolicyRule[] {
  return perms.map((p) => ({
    apiGroups: [p.group],
    resources: [p.resource],
    ...(p.resourceNames ? { resourceNames: [...p.resourceNames] } : {}),
    verbs: [...p.verbs],
  }));
}

function roleObjects(
  v: DeployValues,
  component: RbacComponent,
  serviceAccount: string,
  all: readonly Permission[],
): Manifest[] {
  const perms = all.filter((p) => !p.headroomOnly || headroomOn(v));
  const out: Manifest[] = [];
  const base = `s3-csi-${component}`;
  const meta = (name: string, namespace?: string) => ({
    name,
    ...(namespace ? { namespace } : {}),
    labels: commonLabels(v, component),
    annotations: { [ANNOTATION_RBAC_FOR]: component },
  });
  const subject = { kind: "ServiceAccount", name: serviceAccount, namespace: v.namespace };
  const cluster = perms.filter((p) => p.scope === "cluster");
  if (cluster.length) {
    out.push({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: meta(base),
      rules: rules(cluster),
    }, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: meta(base),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: base },
      subjects: [subject],
    });
  }
  const scoped: [PermissionScope, string, string][] = [
    ["mountpoint-namespace", v.mountpointPod.namespace, `${base}-mountpoint-pods`],
    ["driver-namespace", v.namespace, `${base}-leader-election`],
  ];
  for (const [scope, namespace, name] of scoped) {
    const mine = perms.filter((p) => p.scope === scope);
    if (!mine.length) continue;
    out.push({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: meta(name, namespace),
      rules: rules(mine),
    }, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: meta(name, namespace),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [subject],
    });
  }
  return out;
}

/** ServiceAccounts, roles and bindings of every component. */
export function renderRbac(v: DeployValues): Manifest[] {
  const sa = (name: string, component: string): Manifest => ({
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name, namespace: v.namespace, labels: commonLabels(v, component) },
  });
  return [
    sa(NODE_SERVICE_ACCOUNT, "node"),
    sa(CONTROLLER_SERVICE_ACCOUNT, "controller"),
    ...(v.provisioner.enabled ? [sa(PROVISIONER_SERVICE_ACCOUNT, "provisioner")] : []),
    ...roleObjects(v, "node", NODE_SERVICE_ACCOUNT, NODE_PERMISSIONS),
    ...roleObjects(v, "controller", CONTROLLER_SERVICE_ACCOUNT, CONTROLLER_PERMISSIONS),
    ...(v.provisioner.enabled
      ? roleObjects(v, "provisioner", PROVISIONER_SERVICE_ACCOUNT, PROVISIONER_PERMISSIONS)
      : []),
  ];
}

/** The lease names the controller and the csi-provisioner take (documentation and tests). */
export const LEASE_NAMES: readonly string[] = [CONTROLLER_DEPLOYMENT, PROVISIONER_LEASE];
