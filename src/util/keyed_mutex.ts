/**
 * {@link KeyedMutex}: one FIFO mutex per key, created on demand and dropped when nobody holds or
 * waits for it. The node plugin takes it per Mountpoint Pod so that concurrent publishes and the
 * unmounter never work on the same source mount at once, while different pods proceed in parallel.
 *
 * @module
 */

/** A mutex per key. Waiters are served in arrival order. */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();
  readonly #counts = new Map<string, number>();

  /** Number of keys currently held or awaited (for tests and metrics). */
  get size(): number {
    return this.#counts.size;
  }

  /** True when `key` is held or awaited. */
  isLocked(key: string): boolean {
    return this.#counts.has(key);
  }

  /**
   * Wait for `key`, then resolve with a release function (call it exactly once; extra calls are
   * ignored). Prefer {@link run}. When `signal` aborts first, the wait rejects with its reason
   * and the place in the queue is given up (later waiters are not held back).
   */
  async acquire(key: string, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.#tails.set(key, tail);
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    let released = false;
    const unlock = () => {
      if (released) return;
      released = true;
      const n = (this.#counts.get(key) ?? 1) - 1;
      if (n === 0) {
        this.#counts.delete(key);
        this.#tails.delete(key);
      } else {
        this.#counts.set(key, n);
      }
      release();
    };
    if (!signal) {
      await previous;
      return unlock;
    }
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      await Promise.race([previous, aborted]);
      return unlock;
    } catch (err) {
      // Our turn still comes after `previous`: pass it on at once.
      void previous.then(unlock);
      throw err;
    } finally {
      signal.removeEventListener("abort", onAbort!);
    }
  }

  /**
   * Run `fn` while holding `key`; the lock is released however `fn` ends. The wait for the lock
   * (not `fn`) stops when `signal` aborts.
   */
  async run<T>(key: string, fn: () => Promise<T> | T, signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(key, signal);
    try {
      return await fn();
    } finally {
      release();
    }
  }
}
