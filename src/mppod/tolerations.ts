/**
 * Which taints a Mountpoint Pod tolerates. The rule: a Mountpoint Pod tolerates what its workloads
 * need to keep their volumes, and nothing else.
 *
 * - Scheduling taints (`NoSchedule`, `PreferNoSchedule`), all of them: a Mountpoint Pod is created
 *   only for a workload already bound to its node, pinned there by node affinity, so these taints
 *   can never attract it anywhere; a workload placed before the node was tainted or cordoned (or
 *   one that tolerates the taint) still needs its Mountpoint Pod there, also when it is recreated.
 * - Execution taints (`NoExecute`): exactly those its workloads tolerate (their tolerations with
 *   effect `NoExecute` or no effect), without `tolerationSeconds`: while a workload stays, its
 *   Mountpoint Pod stays; once the workloads are gone the controller releases it (needs-unmount,
 *   clean unmount), so it leaves after them. A `NoExecute` taint that none of its workloads
 *   tolerates evicts the Mountpoint Pod together with them; its mounter keeps serving them through
 *   their grace period (drain grace) until the node plugin has unmounted.
 *
 * A workload shares a Mountpoint Pod only when the pod already tolerates the workload's
 * `NoExecute` tolerations ({@link coversTolerations}); otherwise it gets its own.
 *
 * @module
 */

/** A toleration as the API carries it. */
export interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
  tolerationSeconds?: number;
}

/** Tolerated by every Mountpoint Pod: the scheduling taints. */
export const SCHEDULING_TOLERATIONS: readonly Toleration[] = [
  { operator: "Exists", effect: "NoSchedule" },
  { operator: "Exists", effect: "PreferNoSchedule" },
];

function normalize(t: Toleration): Toleration {
  const operator = t.operator === "Exists" ? "Exists" : "Equal";
  return {
    ...(t.key ? { key: t.key } : {}),
    operator,
    ...(operator === "Equal" ? { value: t.value ?? "" } : {}),
    ...(t.effect ? { effect: t.effect } : {}),
  };
}

function asTolerations(list: readonly unknown[] | undefined): Toleration[] {
  return (list ?? []).filter((t): t is Toleration => typeof t === "object" && t !== null);
}

/**
 * The tolerations of `list` that tolerate `NoExecute` taints (effect `NoExecute` or none),
 * normalized (default operator spelled out, no `tolerationSeconds`), deduplicated, sorted.
 */
export function executeTolerations(list: readonly unknown[] | undefined): Toleration[] {
  const seen = new Map<string, Toleration>();
  for (const t of asTolerations(list)) {
    if (t.effect && t.effect !== "NoExecute") continue;
    const n = normalize(t);
    seen.set(JSON.stringify(n), n);
  }
  return [...seen.entries()].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([, t]) => t);
}

/** The tolerations of a Mountpoint Pod serving workloads with these tolerations. */
export function mountpointTolerations(
  workloads: readonly (readonly unknown[] | undefined)[],
): Toleration[] {
  return [...SCHEDULING_TOLERATIONS, ...executeTolerations(workloads.flatMap((w) => w ?? []))];
}

/** True when toleration `m` tolerates every taint `w` tolerates. */
function covers(m: Toleration, w: Toleration): boolean {
  if (m.effect && m.effect !== w.effect) return false;
  if (m.operator === "Exists" && !m.key) return true;
  if (m.key !== w.key) return false;
  if (m.operator === "Exists") return true;
  return w.operator !== "Exists" && (m.value ?? "") === (w.value ?? "");
}

/**
 * True when a Mountpoint Pod with tolerations `mp` keeps serving a workload with tolerations
 * `workload` on every node the workload stays on: each `NoExecute` toleration of the workload is
 * matched by one of the pod's. (A pod of an older driver version tolerates everything.)
 */
export function coversTolerations(
  mp: readonly unknown[] | undefined,
  workload: readonly unknown[] | undefined,
): boolean {
  const own = asTolerations(mp).map(normalize);
  return executeTolerations(workload).every((w) => own.some((m) => covers(m, w)));
}
