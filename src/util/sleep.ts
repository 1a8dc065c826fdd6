/**
 * Timers bounded by an AbortSignal. Two behaviours on abort, named apart so every call site says
 * which one it means:
 *
 * - {@link sleep} rejects with `signal.reason`: for a step of an operation that must stop when
 *   cancelled (the caller's `try`/`finally` cleans up);
 * - {@link pause} resolves early: for a loop that checks `signal.aborted` itself (informers, leader
 *   election, backoff between retries).
 *
 * The timer and the abort listener are both released in every case, so nothing leaks.
 *
 * @module
 */

function timer(ms: number, signal: AbortSignal | undefined, rejectOnAbort: boolean) {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return rejectOnAbort ? reject(signal.reason) : resolve();
    const onAbort = () => {
      clearTimeout(id);
      if (rejectOnAbort) reject(signal?.reason);
      else resolve();
    };
    const id = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Resolve after `ms` milliseconds, or reject with `signal.reason` as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return timer(ms, signal, true);
}

/** Resolve after `ms` milliseconds, or as soon as `signal` aborts; never rejects. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return timer(ms, signal, false);
}

/** Resolve when `signal` aborts (at once if it already has); never rejects. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
