/**
 * Leader election on a coordination.k8s.io/v1 Lease, wire-compatible with client-go's and with its
 * timing rules:
 *
 * - **Expiry is judged only by local monotonic time.** A candidate remembers when it last saw the
 *   lease record *change* (`observedAt`, `performance.now()`); the lease is free once
 *   `observedAt + leaseDurationSeconds` has passed with no change. The remote `renewTime` is
 *   written for humans and never compared with the local clock, so clock skew between machines
 *   cannot steal a lease. (A fresh candidate therefore waits one full lease duration before it
 *   takes over a lease that was not released.)
 * - **Mutual exclusion on the server** rests on the 409 for a stale resourceVersion on update.
 * - **A leader acts only while its lease is valid by its own clock:** its validity ends
 *   `renewDeadline` after it *sent* its last successful renewal. {@link LeaderElector.remainingMs}
 *   is the write fence the REST client's transport asks right before a write's bytes leave, so a
 *   leader whose renewals hang, or that was stopped (SIGSTOP) and resumed, sends nothing once that
 *   time has passed, even before its renew loop notices. Every renewal is bounded by the remaining
 *   validity.
 * - Because `renewDeadline < leaseDuration`, the old leader's validity ends at least
 *   `leaseDuration − renewDeadline` before any other candidate can see the lease as expired: that
 *   margin absorbs a write that left just before the fence closed.
 * - A leader that sees another holder, or cannot renew before its validity ends, steps down
 *   ("lost"); callers exit so a fresh process contends again. The end of the validity is its own
 *   timer, armed at `validFrom + renewDeadline` and moved on by each successful renewal: it stops
 *   the leader's work and closes the write fence on time even when a renewal never returns (a
 *   client that ignores its deadline), and a renewal that lands after it is ignored. On a graceful
 *   stop the lease is released (empty holder) so a successor need not wait.
 *
 * @module
 */
import type { KubeClient } from "./client.ts";
import { AlreadyExistsError, ConflictError } from "./errors.ts";
import { LEASES } from "./resources.ts";
import type { Lease } from "./types.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { aborted, pause } from "../util/sleep.ts";
import { microTime } from "./time.ts";

/** Options of {@link LeaderElector}. */
export interface LeaderElectionOptions {
  /** Client for the Lease calls (a separate one from the workers' is best). */
  readonly client: KubeClient;
  readonly namespace: string;
  readonly name: string;
  /** This candidate's identity (pod name + random suffix). */
  readonly identity: string;
  /** How long a non-renewed lease stays held, as observed by others. */
  readonly leaseDurationMs: number;
  /** A leader that cannot renew within this time after its last renewal stops acting. */
  readonly renewDeadlineMs: number;
  /** Pause between attempts to acquire or renew. */
  readonly retryPeriodMs: number;
  /** Called when this candidate becomes leader; the signal aborts when leadership ends. */
  readonly onStartedLeading: (signal: AbortSignal) => Promise<void>;
  /** Monotonic clock in milliseconds. @default performance.now */
  readonly now?: () => number;
  /** Wall clock, only for the human-readable times written into the Lease. @default Date.now */
  readonly wallClock?: () => number;
}

/** Why the timing settings cannot work, or undefined (client-go's checks). */
export function leaderElectionProblem(
  o: Pick<LeaderElectionOptions, "leaseDurationMs" | "renewDeadlineMs" | "retryPeriodMs">,
): string | undefined {
  if (!(o.leaseDurationMs > o.renewDeadlineMs)) {
    return `the lease duration (${o.leaseDurationMs} ms) must be greater than the renew deadline (${o.renewDeadlineMs} ms)`;
  }
  if (!(o.renewDeadlineMs > 1.2 * o.retryPeriodMs)) {
    return `the renew deadline (${o.renewDeadlineMs} ms) must be greater than 1.2 × the retry period (${o.retryPeriodMs} ms)`;
  }
  if (!(o.retryPeriodMs > 0)) return "the retry period must be greater than zero";
  return undefined;
}

/**
 * The parts of a Lease whose change counts as activity of the holder: the record client-go compares,
 * plus the resourceVersion (any write is activity, even one that kept the same renewTime).
 */
function recordOf(lease: Lease): string {
  const s = lease.spec ?? {};
  return JSON.stringify([
    lease.metadata?.resourceVersion ?? "",
    s.holderIdentity ?? "",
    s.leaseDurationSeconds ?? 0,
    s.acquireTime ?? "",
    s.renewTime ?? "",
    s.leaseTransitions ?? 0,
  ]);
}

/** One candidate. */
export class LeaderElector {
  readonly #o: LeaderElectionOptions;
  readonly #now: () => number;
  readonly #log = logger("kube", "leader");
  /** Last lease seen or written, with the monotonic time its record last changed. */
  #observed: { lease: Lease; record: string; at: number } | undefined;
  /** Monotonic time the last successful acquire/renew was sent, while leading. */
  #validFrom: number | undefined;
  /** Bumped when leadership ends: a write sent in an earlier term no longer makes us leader. */
  #term = 0;

  /** Create a candidate; nothing happens until {@link run}. */
  constructor(options: LeaderElectionOptions) {
    const problem = leaderElectionProblem(options);
    if (problem) throw new RangeError(`Leader election: ${problem}`);
    this.#o = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** True while this candidate holds a lease that is valid by its own clock. */
  get isLeader(): boolean {
    return this.remainingMs() > 0;
  }

  /**
   * How long this process may still act as leader (≤ 0: it may not). The write fence of the
   * workers' API client.
   */
  remainingMs(): number {
    if (this.#validFrom === undefined) return 0;
    return this.#validFrom + this.#o.renewDeadlineMs - this.#now();
  }

  /**
   * Contend until `signal` aborts. Resolves "stopped" when `signal` aborted (the lease is released
   * if still held) or "lost" when leadership ended without being asked to.
   */
  async run(signal: AbortSignal): Promise<"stopped" | "lost"> {
    const o = this.#o;
    while (!signal.aborted) {
      const acquired = await this.#tryAcquireOrRenew(o.renewDeadlineMs, signal).catch((err) => {
        if (!signal.aborted) {
          this.#log.warn("Lease {lease}: {error}", { lease: o.name, error: errorMessage(err) });
        }
        return false;
      });
      if (acquired) return await this.#lead(signal);
      await pause(o.retryPeriodMs, signal);
    }
    return "stopped";
  }

  async #lead(signal: AbortSignal): Promise<"stopped" | "lost"> {
    const o = this.#o;
    this.#log.info("{identity} became leader ({namespace}/{lease})", {
      identity: o.identity,
      namespace: o.namespace,
      lease: o.name,
    });
    const leading = new AbortController();
    const onStop = () => leading.abort();
    signal.addEventListener("abort", onStop, { once: true });
    // The step-down timer: at the end of the validity, whatever a renewal in flight is doing.
    const expired = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        this.#endTerm();
        expired.abort();
        leading.abort();
      }, Math.max(0, this.remainingMs()));
    };
    arm();
    const work = o.onStartedLeading(leading.signal).catch((err) => {
      this.#log.error("Leader work failed: {error}", { error: errorMessage(err) });
    });
    const either = AbortSignal.any([signal, expired.signal]);
    let lost = false;
    while (!signal.aborted) {
      // Sleep one retry period, but never past the end of the validity.
      await pause(Math.max(0, Math.min(o.retryPeriodMs, this.remainingMs())), either);
      if (signal.aborted) break;
      const remaining = this.remainingMs();
      let ok = false;
      if (remaining > 0 && !expired.signal.aborted) {
        const renewal = this.#tryAcquireOrRenew(remaining, signal).catch((err) => {
          if (!signal.aborted && !expired.signal.aborted) {
            this.#log.warn("Renewing lease {lease} failed: {error}", {
              lease: o.name,
              error: errorMessage(err),
            });
          }
          return false;
        });
        ok = await Promise.race([renewal, aborted(expired.signal).then(() => false)]);
      }
      if (signal.aborted) break;
      if (expired.signal.aborted) {
        lost = true;
        break;
      }
      if (ok) arm();
      const holder = this.#observed?.lease.spec?.holderIdentity;
      if (!ok && (this.remainingMs() <= 0 || (holder && holder !== o.identity))) {
        lost = true;
        break;
      }
    }
    clearTimeout(timer);
    const stillValid = this.isLeader;
    this.#endTerm();
    if (lost) {
      this.#log.error(
        "{identity} lost the lease {lease} (not renewed within {deadline} ms, or taken over): stepping down",
        { identity: o.identity, lease: o.name, deadline: o.renewDeadlineMs },
      );
    }
    leading.abort();
    signal.removeEventListener("abort", onStop);
    await work;
    if (lost) return "lost";
    if (stillValid) await this.#release().catch(() => {});
    return "stopped";
  }

  /** Leadership ends now: the write fence closes, and later answers to earlier writes count for nothing. */
  #endTerm(): void {
    this.#validFrom = undefined;
    this.#term++;
  }

  /**
   * One attempt to acquire or renew, bounded by the remaining validity while leading (else by the
   * renew deadline). True when this candidate holds the lease afterwards. {@link run} calls it;
   * public for tests of the timing rules.
   */
  tryAcquireOrRenew(signal: AbortSignal = new AbortController().signal): Promise<boolean> {
    const budget = this.#validFrom !== undefined ? this.remainingMs() : this.#o.renewDeadlineMs;
    return budget > 0 ? this.#tryAcquireOrRenew(budget, signal) : Promise.resolve(false);
  }

  async #tryAcquireOrRenew(budgetMs: number, signal: AbortSignal): Promise<boolean> {
    const o = this.#o;
    const term = this.#term;
    const bounded = AbortSignal.any([signal, AbortSignal.timeout(Math.max(1, budgetMs))]);
    const call = { signal: bounded, timeoutMs: Math.max(1, budgetMs) };
    const durationSeconds = Math.ceil(o.leaseDurationMs / 1000);
    const wall = () => microTime(new Date((o.wallClock ?? Date.now)()));
    // A leader renews from the copy it wrote last (one request); others read the lease first.
    let lease = this.#validFrom !== undefined ? this.#observed?.lease : undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      if (!lease) {
        lease = await o.client.get<Lease>(LEASES, o.name, o.namespace, call);
        if (!lease) {
          const sentAt = this.#now();
          const t = wall();
          try {
            const created = await o.client.create<Lease>(LEASES, {
              metadata: { name: o.name, namespace: o.namespace },
              spec: {
                holderIdentity: o.identity,
                leaseDurationSeconds: durationSeconds,
                acquireTime: t,
                renewTime: t,
                leaseTransitions: 0,
              },
            }, call);
            return this.#wrote(created, sentAt, term);
          } catch (err) {
            if (err instanceof AlreadyExistsError) return false;
            throw err;
          }
        }
        this.#observe(lease);
      }
      const spec = lease.spec ?? {};
      const holder = spec.holderIdentity ?? "";
      const mine = holder === o.identity;
      if (holder && !mine) {
        const seen = this.#observed!;
        const expiresAt = seen.at + (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
        if (this.#now() < expiresAt) return false;
      }
      const t = wall();
      const next: Lease = {
        ...lease,
        spec: {
          ...spec,
          holderIdentity: o.identity,
          leaseDurationSeconds: durationSeconds,
          renewTime: t,
          ...(mine && this.#validFrom !== undefined
            ? {}
            : { acquireTime: t, leaseTransitions: (spec.leaseTransitions ?? 0) + (mine ? 0 : 1) }),
        },
      };
      const sentAt = this.#now();
      try {
        return this.#wrote(await o.client.update<Lease>(LEASES, next, call), sentAt, term);
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        // Someone else wrote it meanwhile: read it again and decide once more.
        lease = undefined;
      }
    }
    return false;
  }

  /** Remember a lease read from the server; its record's change time is now if it changed. */
  #observe(lease: Lease): void {
    const record = recordOf(lease);
    if (this.#observed?.record === record) this.#observed.lease = lease;
    else this.#observed = { lease, record, at: this.#now() };
  }

  /**
   * Our write succeeded: remember the lease and start the validity at `sentAt`, unless the term it
   * was sent in has ended meanwhile (then it counts for nothing: false).
   */
  #wrote(lease: Lease, sentAt: number, term: number): boolean {
    this.#observed = { lease, record: recordOf(lease), at: this.#now() };
    if (term !== this.#term) return false;
    this.#validFrom = sentAt;
    return true;
  }

  /** Give the lease up (empty holder, 1 s duration) so a successor need not wait. */
  async #release(): Promise<void> {
    const lease = this.#observed?.lease;
    if (!lease || lease.spec?.holderIdentity !== this.#o.identity) return;
    const t = microTime(new Date((this.#o.wallClock ?? Date.now)()));
    await this.#o.client.update(LEASES, {
      ...lease,
      spec: {
        ...lease.spec,
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: t,
        renewTime: t,
      },
    }, { timeoutMs: this.#o.renewDeadlineMs });
    this.#log.info("{identity} released the lease {lease}", {
      identity: this.#o.identity,
      lease: this.#o.name,
    });
  }
}

/**
 * Contend for the lease until `signal` aborts (see {@link LeaderElector}). Resolves "stopped" or
 * "lost".
 */
export function runLeaderElection(
  o: LeaderElectionOptions,
  signal: AbortSignal,
): Promise<"stopped" | "lost"> {
  return new LeaderElector(o).run(signal);
}
