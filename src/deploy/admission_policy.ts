/**
 * The shape every admission policy of the manifests shares: a ValidatingAdmissionPolicy that
 * fails closed (`failurePolicy: Fail`) and its binding with `validationActions: [Deny]`, both
 * under one name and the driver's labels; plus the CEL pieces more than one policy writes.
 *
 * @module
 */
import type { Manifest } from "./k8s_objects.ts";

/** What differs between the policies. */
export interface AdmissionPolicy {
  /** Name of the policy and its binding. */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** The policy's `spec` but `failurePolicy` (match constraints, conditions, validations). */
  readonly spec: Readonly<Record<string, unknown>>;
  /** Annotations of the binding (e.g. what it validates). */
  readonly bindingAnnotations?: Readonly<Record<string, string>>;
}

/** The policy and its binding. */
export function admissionPolicy(p: AdmissionPolicy): Manifest[] {
  const meta = { name: p.name, labels: p.labels };
  return [{
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: meta,
    spec: { failurePolicy: "Fail", ...p.spec },
  }, {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: p.bindingAnnotations ? { ...meta, annotations: p.bindingAnnotations } : meta,
    spec: { policyName: p.name, validationActions: ["Deny"] },
  }];
}

/** One `resourceRules` entry: `operations` on `resources` of API group `group`. */
export function resourceRule(
  group: string,
  resources: readonly string[],
  operations: readonly string[],
  versions: readonly string[] = ["*"],
): Record<string, unknown> {
  return { apiGroups: [group], apiVersions: versions, operations, resources };
}

/** The user name of ServiceAccount `name` in `namespace`. */
export function serviceAccountUser(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

/**
 * CEL: field `path` of the object is unchanged by the update
 * (`has(a.f) == has(b.f) && (!has(a.f) || a.f == b.f)`, parenthesised; CEL has no optionals here).
 */
export function unchanged(path: string): string {
  const now = `object.${path}`;
  const old = `oldObject.${path}`;
  return `(has(${now}) == has(${old}) && (!has(${now}) || ${now} == ${old}))`;
}
