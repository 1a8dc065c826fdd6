/**
 * The API resources the deployment writes, and the order they are applied in (undeploy deletes in
 * the reverse order): namespaces and the CRD first, workloads last, so nothing starts before its
 * permissions, priority classes and ConfigMaps exist.
 *
 * @module
 */
import type { Resource } from "../kube/resources.ts";
import type { Manifest } from "./k8s_objects.ts";

function r(gv: string, plural: string, kind: string, namespaced: boolean): Resource {
  const [group, version] = gv.includes("/") ? gv.split("/") as [string, string] : ["", gv];
  return { group, version, plural, kind, namespaced };
}

/** Every kind the deployment renders, in apply order. */
export const DEPLOY_KINDS: readonly Resource[] = [
  r("v1", "namespaces", "Namespace", false),
  r("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", false),
  r("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", false),
  r("storage.k8s.io/v1", "csidrivers", "CSIDriver", false),
  r("v1", "serviceaccounts", "ServiceAccount", true),
  r("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", false),
  r("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", false),
  r("rbac.authorization.k8s.io/v1", "roles", "Role", true),
  r("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", true),
  r("v1", "configmaps", "ConfigMap", true),
  r("apps/v1", "deployments", "Deployment", true),
  r("apps/v1", "daemonsets", "DaemonSet", true),
];

/** CustomResourceDefinitions. */
export const CRD_RESOURCE: Resource = DEPLOY_KINDS[1]!;
/** Deployments. */
export const DEPLOYMENTS: Resource = DEPLOY_KINDS[10]!;
/** DaemonSets. */
export const DAEMONSETS: Resource = DEPLOY_KINDS[11]!;

/** Thrown for an object whose kind the deployment does not know. */
export class UnknownKindError extends Error {
  /** Build for `apiVersion`/`kind`. */
  constructor(apiVersion: string, kind: string) {
    super(`The deployment does not handle ${apiVersion} ${kind}`);
    this.name = "UnknownKindError";
  }
}

/** The resource of a rendered object. @throws {UnknownKindError} */
export function resourceOf(obj: Manifest): Resource {
  const found = DEPLOY_KINDS.find((k) =>
    k.kind === obj.kind && (k.group ? `${k.group}/${k.version}` : k.version) === obj.apiVersion
  );
  if (!found) throw new UnknownKindError(obj.apiVersion, obj.kind);
  return found;
}

/** Position of an object's kind in the apply order. */
export function applyRank(obj: Manifest): number {
  return DEPLOY_KINDS.indexOf(resourceOf(obj));
}

/** Sort objects into apply order (stable within a kind). */
export function inApplyOrder(objects: readonly Manifest[]): Manifest[] {
  return objects.map((o, i) => ({ o, i, rank: applyRank(o) }))
    .sort((a, b) => a.rank - b.rank || a.i - b.i).map((x) => x.o);
}

/** `Kind namespace/name` for messages. */
export function describe(obj: Manifest): string {
  const ns = obj.metadata.namespace;
  return `${obj.kind} ${ns ? `${ns}/` : ""}${obj.metadata.name}`;
}
