/**
 * A keyed work queue with controller-runtime semantics:
 * - a key is queued at most once; a key being processed is never processed concurrently — if it
 *   is added meanwhile it runs again afterwards;
 * - a failed key (thrown error or `requeue: true`) is retried with per-key exponential back-off
 *   (`baseDelayMs` doubling up to `maxDelayMs`); success resets its back-off;
 * - `requeueAfterMs` schedules a plain delayed retry.
 *
 * @module
 */
import { errorMessage } from "./errors.ts";
import { logger } from "./log.ts";

/** What a processing function asks for. */
export interface ProcessResult {
  /** Retry with back-off. */
  readonly requeue?: boolean;
  /** Retry after this delay (no back-off growth). */
  readonly requeueAfterMs?: number;
}

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** Process one key. */
  readonly process: (key: string) => Promise<ProcessResult | void>;
  /** Concurrent workers. @default 4 */
  readonly workers?: number;
  /** @default 100 */
  readonly baseDelayMs?: number;
  /** @default 60000 */
  readonly maxDelayMs?: number;
  /** Called after each processed key (metrics). */
  readonly observe?: (
    key: string,
    outcome: "success" | "requeue" | "error",
    seconds: number,
  ) => void;
}

/** The queue. */
export class WorkQueue {
  readonly #options: WorkQueueOptions;
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #log = logger("controller", "queue");
  #wake: (() => void) | undefined;
  #idleWaiters: (() => void)[] = [];
  #stopped = false;

  /** Create a queue; call {@link run} to start workers. */
  constructor(options: WorkQueueOptions) {
    this.#options = options;
  }

  /** Number of keys waiting (not counting delayed ones). */
  get length(): number {
    return this.#queue.length;
  }

  /** Queue `key` now. */
  add(key: string): void {
    if (this.#stopped) return;
    const timer = this.#timers.get(key);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.#timers.delete(key);
    }
    if (this.#processing.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#queue.push(key);
    this.#wake?.();
  }

  /** Queue `key` after `ms` (a sooner {@link add} wins). */
  addAfter(key: string, ms: number): void {
    if (this.#stopped || this.#queued.has(key) || this.#timers.has(key)) return;
    this.#timers.set(
      key,
      setTimeout(() => {
        this.#timers.delete(key);
        this.add(key);
      }, ms),
    );
  }

  /** Resolve when nothing is queued, processing or scheduled. */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #isIdle(): boolean {
    return this.#queue.length === 0 && this.#processing.size === 0 && this.#timers.size === 0;
  }

  /** Run the workers until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const stop = () => {
      this.#stopped = true;
      for (const t of this.#timers.values()) clearTimeout(t);
      this.#timers.clear();
      this.#wake?.();
    };
    signal.addEventListener("abort", stop, { once: true });
    const workers = Array.from({ length: this.#options.workers ?? 4 }, () => this.#worker());
    await Promise.all(workers);
    signal.removeEventListener("abort", stop);
  }

  async #worker(): Promise<void> {
    while (!this.#stopped) {
      const key = this.#queue.shift();
      if (key === undefined) {
        await new Promise<void>((resolve) => {
          const prev = this.#wake;
          this.#wake = () => {
            this.#wake = undefined;
            prev?.();
            resolve();
          };
        });
        continue;
      }
      this.#queued.delete(key);
      this.#processing.add(key);
      await this.#processOne(key);
      this.#processing.delete(key);
      if (this.#dirty.delete(key)) this.add(key);
      if (this.#isIdle()) { for (const w of this.#idleWaiters.splice(0)) w(); }
    }
  }

  async #processOne(key: string): Promise<void> {
    const started = performance.now();
    let outcome: "success" | "requeue" | "error" = "success";
    try {
      const result = await this.#options.process(key);
      if (result?.requeue) {
        outcome = "requeue";
        this.#retryWithBackoff(key);
      } else {
        this.#failures.delete(key);
        if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
      }
    } catch (err) {
      outcome = "error";
      const delay = this.#retryWithBackoff(key);
      this.#log.warn("Reconcile of {key} failed, retrying in {delayMs} ms: {error}", {
        key,
        delayMs: delay,
        error: errorMessage(err),
      });
    }
    this.#options.observe?.(key, outcome, (performance.now() - started) / 1000);
  }

  #retryWithBackoff(key: string): number {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    const base = this.#options.baseDelayMs ?? 100;
    const delay = Math.min(base * 2 ** (failures - 1), this.#options.maxDelayMs ?? 60_000);
    this.addAfter(key, delay);
    return delay;
  }
}
