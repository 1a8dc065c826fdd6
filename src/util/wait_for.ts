/**
 * {@link waitFor}: poll a condition until it yields a value, bounded by a deadline and an
 * AbortSignal. For conditions nobody can notify us of (another process's files, an API server's
 * state); where an event exists, await the event instead.
 *
 * @module
 */
import { pause } from "./sleep.ts";
import { TimeoutError } from "./errors.ts";

/** What {@link waitFor} waits for: a truthy value. */
export type Found<T> = Exclude<NonNullable<T>, false | "" | 0>;

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this many milliseconds (default 10 s). */
  readonly timeoutMs?: number;
  /** Time between two checks (default 20 ms). */
  readonly intervalMs?: number;
  /** Stop waiting (rejecting with the signal's reason) when this aborts. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Call `check` until it returns a truthy value, and return it.
 * @throws {TimeoutError} naming `what` when `timeoutMs` passes first
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<Found<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    options.signal?.throwIfAborted();
    const v = await check();
    if (v) return v as Found<T>;
    if (performance.now() >= deadline) throw new TimeoutError(what, timeoutMs);
    await pause(options.intervalMs ?? 20, options.signal);
  }
}
