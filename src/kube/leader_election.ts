/**
 * Leader election on a coordination.k8s.io/v1 Lease, wire-compatible with client-go's: the holder
 * renews `renewTime` every retry period; a candidate takes over once `renewTime +
 * leaseDurationSeconds` has passed; mutual exclusion rests on the API server's 409 for a stale
 * resourceVersion. A leader that cannot renew within the renew deadline steps down.
 *
 * @module
 */
import type { KubeClient } from "./client.ts";
import { AlreadyExistsError, ConflictError } from "./errors.ts";
import { LEASES } from "./resources.ts";
import { type Lease } from "./types.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { pause } from "../util/sleep.ts";
import { microTime } from "./time.ts";

/** Options of {@link runLeaderElection}. */
export interface LeaderElectionOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly name: string;
  /** This candidate's identity (pod name + random suffix). */
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** Called when this candidate becomes leader; the signal aborts when leadership is lost. */
  readonly onStartedLeading: (signal: AbortSignal) => Promise<void>;
  readonly now?: () => number;
}

/**
 * Contend for the lease until `signal` aborts. Resolves with "stopped" when `signal` aborted, or
 * "lost" when leadership was lost (callers normally exit so a fresh process contends again).
 */
export async function runLeaderElection(
  o: LeaderElectionOptions,
  signal: AbortSignal,
): Promise<"stopped" | "lost"> {
  const log = logger("kube", "leader");
  const now = o.now ?? Date.now;
  while (!signal.aborted) {
    if (
      await tryAcquireOrRenew(o, now).catch((
        err,
      ) => (log.warn("Lease {lease}: {error}", { lease: o.name, error: errorMessage(err) }), false))
    ) {
      log.info("{identity} became leader ({namespace}/{lease})", {
        identity: o.identity,
        namespace: o.namespace,
        lease: o.name,
      });
      const leading = new AbortController();
      const onStop = () => leading.abort();
      signal.addEventListener("abort", onStop, { once: true });
      const work = o.onStartedLeading(leading.signal);
      let lastRenew = now();
      while (!signal.aborted) {
        await pause(o.retryPeriodMs, signal);
        if (signal.aborted) break;
        const ok = await tryAcquireOrRenew(o, now).catch(() => false);
        if (ok) lastRenew = now();
        else if (now() - lastRenew > o.renewDeadlineMs) {
          log.error("{identity} lost the lease {lease}: stepping down", {
            identity: o.identity,
            lease: o.name,
          });
          leading.abort();
          await work.catch(() => {});
          signal.removeEventListener("abort", onStop);
          return "lost";
        }
      }
      leading.abort();
      await work.catch(() => {});
      await release(o).catch(() => {});
      return "stopped";
    }
    await pause(o.retryPeriodMs, signal);
  }
  return "stopped";
}

async function tryAcquireOrRenew(o: LeaderElectionOptions, now: () => number): Promise<boolean> {
  const lease = await o.client.get<Lease>(LEASES, o.name, o.namespace);
  const t = microTime(new Date(now()));
  const durationSeconds = Math.ceil(o.leaseDurationMs / 1000);
  if (!lease) {
    try {
      await o.client.create<Lease>(LEASES, {
        metadata: { name: o.name, namespace: o.namespace },
        spec: {
          holderIdentity: o.identity,
          leaseDurationSeconds: durationSeconds,
          acquireTime: t,
          renewTime: t,
          leaseTransitions: 0,
        },
      });
      return true;
    } catch (err) {
      if (err instanceof AlreadyExistsError) return false;
      throw err;
    }
  }
  const spec = lease.spec ?? {};
  const held = spec.holderIdentity && spec.holderIdentity !== o.identity;
  const renewed = Date.parse(spec.renewTime ?? spec.acquireTime ?? "");
  const expired = !Number.isFinite(renewed) ||
    now() > renewed + (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
  if (held && !expired) return false;
  const next: Lease = {
    ...lease,
    spec: {
      ...spec,
      holderIdentity: o.identity,
      leaseDurationSeconds: durationSeconds,
      renewTime: t,
      ...(held || !spec.holderIdentity
        ? { acquireTime: t, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }
        : {}),
    },
  };
  try {
    await o.client.update(LEASES, next);
    return true;
  } catch (err) {
    if (err instanceof ConflictError) return false;
    throw err;
  }
}

async function release(o: LeaderElectionOptions): Promise<void> {
  const lease = await o.client.get<Lease>(LEASES, o.name, o.namespace);
  if (lease?.spec?.holderIdentity !== o.identity) return;
  await o.client.update(LEASES, {
    ...lease,
    spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1 },
  });
}
