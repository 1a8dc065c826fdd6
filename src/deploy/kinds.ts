/**
 * The API resources the deployment writes, and the order they are applied in (undeploy deletes in
 * the reverse order): namespaces and the CRD first, workloads last, so nothing starts before its
 * permissions, priority classes and ConfigMaps exist.
 *
 * @module
 */
import {
  CLUSTER_ROLE_BINDINGS,
  CLUSTER_ROLES,
  CONFIGMAPS,
  CRDS,
  CSI_DRIVERS,
  DAEMONSETS,
  DEPLOYMENTS,
  NAMESPACES,
  POD_DISRUPTION_BUDGETS,
  PRIORITY_CLASSES,
  type Resource,
  ROLE_BINDINGS,
  ROLES,
  SERVICE_ACCOUNTS,
  SERVICES,
  VALIDATING_ADMISSION_POLICIES,
  VALIDATING_ADMISSION_POLICY_BINDINGS,
} from "../kube/resources.ts";
import type { Manifest } from "./k8s_objects.ts";

/** Every kind the deployment renders, in apply order. */
export const DEPLOY_KINDS: readonly Resource[] = [
  NAMESPACES,
  CRDS,
  PRIORITY_CLASSES,
  CSI_DRIVERS,
  SERVICE_ACCOUNTS,
  CLUSTER_ROLES,
  CLUSTER_ROLE_BINDINGS,
  ROLES,
  ROLE_BINDINGS,
  VALIDATING_ADMISSION_POLICIES,
  VALIDATING_ADMISSION_POLICY_BINDINGS,
  CONFIGMAPS,
  SERVICES,
  POD_DISRUPTION_BUDGETS,
  DEPLOYMENTS,
  DAEMONSETS,
];

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
