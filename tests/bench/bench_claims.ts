/**
 * When the benchmark's pre-bound claims are ready on a real control plane: the PV binder of
 * kube-controller-manager has completed each binding (until then it may set a claim the benchmark
 * marked Bound back to Pending).
 *
 * @module
 */
import type { PersistentVolumeClaim } from "../../src/kube/types.ts";

/** Binding annotation the PV binder sets on a claim once it has completed the binding. */
const BIND_COMPLETED = "pv.kubernetes.io/bind-completed";

/**
 * Names of the claims whose binding is not complete yet: not `Bound`, or bound without the PV
 * binder's `bind-completed` annotation (the binder may still set such a claim back to Pending).
 */
export function unsettledClaims(claims: readonly PersistentVolumeClaim[]): string[] {
  return claims.filter((c) =>
    c.status?.phase !== "Bound" || c.metadata.annotations?.[BIND_COMPLETED] !== "yes"
  ).map((c) => c.metadata.name!);
}
