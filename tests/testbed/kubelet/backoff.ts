/**
 * Exponential back-off as kubelet uses it (volume operations: 500 ms doubling to 2 m 2 s;
 * container restarts: 10 s doubling to 5 min).
 *
 * @module
 */

/** Settings of a back-off. */
export interface BackoffSettings {
  readonly initialMs: number;
  readonly maxMs: number;
}

/** Volume operations (`nestedpendingoperations`): 500 ms doubling, capped at 122 s. */
export const VOLUME_BACKOFF: BackoffSettings = { initialMs: 500, maxMs: 122_000 };
/** Container restarts (CrashLoopBackOff): 10 s doubling, capped at 5 min. */
export const RESTART_BACKOFF: BackoffSettings = { initialMs: 10_000, maxMs: 300_000 };

/** A back-off counter: each {@link next} doubles the delay up to the cap. */
export class Backoff {
  readonly #settings: BackoffSettings;
  #current = 0;

  /** Create a back-off; the first {@link next} returns `initialMs`. */
  constructor(settings: BackoffSettings) {
    this.#settings = settings;
  }

  /** The delay before the next attempt. */
  next(): number {
    this.#current = this.#current === 0
      ? this.#settings.initialMs
      : Math.min(this.#current * 2, this.#settings.maxMs);
    return this.#current;
  }

  /** Start again from `initialMs`. */
  reset(): void {
    this.#current = 0;
  }
}
