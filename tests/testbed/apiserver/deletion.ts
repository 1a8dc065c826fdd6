/**
 * DELETE semantics (https://kubernetes.io/docs/concepts/architecture/garbage-collection/):
 * preconditions, propagation policies (as finalizers the garbage collector completes), pod graceful
 * deletion, namespace termination and CRD cleanup.
 *
 * 1. Check `preconditions` (uid, resourceVersion) → 409.
 * 2. Add `foregroundDeletion` / `orphan` / CRD cleanup finalizers as the policy requires.
 * 3. Pods: grace = request, else `terminationGracePeriodSeconds`; 0 when unbound or finished.
 * 4. Nothing holds the object → remove it now (pods first get a grace-0 MODIFIED).
 * 5. Otherwise set `deletionTimestamp` (namespaces also `status.phase: Terminating`).
 *
 * @module
 */
import { kubeTime } from "../../../src/kube/time.ts";
import { clone, deepEqual, isObject, type JsonObject, meta } from "./json_value.ts";
import { type ResourceType, storageKey } from "./resources.ts";
import type { ObjectStore } from "./object_store.ts";
import { conflict, notFound } from "./status_errors.ts";

/** DeleteOptions that the emulator honours. */
export interface DeleteOptions {
  /** Grace period override. */
  readonly gracePeriodSeconds?: number;
  /** `Background` (default), `Foreground` or `Orphan`. */
  readonly propagationPolicy?: string;
  /** Preconditions. */
  readonly preconditions?: { readonly uid?: string; readonly resourceVersion?: string };
  /** `dryRun=All`. */
  readonly dryRun?: boolean;
}

/** Result of a delete. */
export interface DeleteResult {
  /** Last state of the object. */
  readonly object: JsonObject;
  /** True when it is gone; false when it is only marked for deletion. */
  readonly gone: boolean;
}

/**
 * What deletion needs of the cluster: the `Cluster` of `cluster.ts` has all of it. Declared here,
 * not imported, so that the cluster (which calls {@link deleteObject}) and this module form no
 * import cycle.
 */
export interface DeletionHost {
  readonly store: ObjectStore;
  readonly podTerminationMs: number | undefined;
  present(t: ResourceType, obj: JsonObject): JsonObject;
  removeNow(t: ResourceType, obj: JsonObject): JsonObject | undefined;
  later(ms: number, fn: () => void): void;
  scheduleGc(): void;
  delete(t: ResourceType, ns: string, name: string, opts?: DeleteOptions): DeleteResult;
}

/**
 * Delete an object. Objects with finalizers (and bound pods with a grace period) are only
 * marked with `deletionTimestamp`; everything else is removed and dependents are collected.
 */
export function deleteObject(
  c: DeletionHost,
  t: ResourceType,
  ns: string,
  name: string,
  opts: DeleteOptions = {},
): DeleteResult {
  const sk = storageKey(t);
  const current = c.store.get(sk, t.namespaced ? ns : "", name);
  if (!current) throw notFound({ resource: t.plural, group: t.group, name });
  const cm = meta(current);
  const pre = opts.preconditions ?? {};
  if (pre.resourceVersion && pre.resourceVersion !== cm.resourceVersion) {
    throw conflict(
      { resource: t.plural, group: t.group, name },
      `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${cm.resourceVersion}). The object might have been modified`,
    );
  }
  if (pre.uid && pre.uid !== cm.uid) {
    throw conflict(
      { resource: t.plural, group: t.group, name },
      `the UID in the precondition (${pre.uid}) does not match the UID in record (${cm.uid}). The object might have been deleted and then recreated`,
    );
  }
  if (opts.dryRun) return { object: c.present(t, current), gone: true };
  const next = clone(current);
  const nm = meta(next);
  const finalizers = [...((nm.finalizers ?? []) as string[])];
  const policy = opts.propagationPolicy ?? "Background";
  if (policy === "Foreground" && !finalizers.includes("foregroundDeletion")) {
    finalizers.push("foregroundDeletion");
  }
  if (policy === "Orphan" && !finalizers.includes("orphan")) finalizers.push("orphan");
  if (t.kind === "CustomResourceDefinition") {
    finalizers.push("customresourcecleanup.apiextensions.k8s.io");
  }
  let grace = 0;
  if (t.kind === "Pod" && t.group === "") {
    grace = podGrace(current, opts.gracePeriodSeconds);
  }
  const isNamespace = t.kind === "Namespace" && t.group === "";
  if (!finalizers.length && grace === 0 && !isNamespace) {
    if (t.kind === "Pod" && t.group === "") {
      nm.deletionTimestamp = kubeTime();
      nm.deletionGracePeriodSeconds = 0;
      c.store.update(sk, next);
    }
    const gone = c.removeNow(t, next) ?? next;
    return { object: c.present(t, gone), gone: true };
  }
  const prevDeadline = cm.deletionTimestamp ? Date.parse(String(cm.deletionTimestamp)) : Infinity;
  const deadline = Date.now() + grace * 1000;
  if (deadline < prevDeadline) {
    nm.deletionTimestamp = kubeTime(deadline);
    nm.deletionGracePeriodSeconds = grace;
  }
  if (finalizers.length) nm.finalizers = [...new Set(finalizers)];
  if (isNamespace) {
    next.status = { ...(isObject(next.status) ? next.status : {}), phase: "Terminating" };
  }
  const stored = deepEqual(next, current) ? current : c.store.update(sk, next);
  if (t.kind === "Pod" && grace > 0 && c.podTerminationMs !== undefined) {
    c.later(
      Math.min(c.podTerminationMs, grace * 1000),
      () => finishPod(c, t, ns, name),
    );
  }
  c.scheduleGc();
  return { object: c.present(t, stored), gone: false };
}

function podGrace(pod: JsonObject, requested: number | undefined): number {
  const spec = (pod.spec ?? {}) as JsonObject;
  const phase = (pod.status as JsonObject | undefined)?.phase;
  if (!spec.nodeName || phase === "Succeeded" || phase === "Failed") return 0;
  const g = requested ?? Number(spec.terminationGracePeriodSeconds ?? 30);
  return g < 0 ? 1 : g;
}

function finishPod(c: DeletionHost, t: ResourceType, ns: string, name: string): void {
  try {
    c.delete(t, ns, name, { gracePeriodSeconds: 0 });
  } catch {
    // Already gone.
  }
}
