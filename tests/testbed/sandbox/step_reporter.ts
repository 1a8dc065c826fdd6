/**
 * Step-by-step output of the sandbox: one line per step, `✓` done, `…` pending (a later issue),
 * `✗` failed, with durations. Written to stdout through `util/stdio.ts`; collected for the summary
 * and for tests.
 *
 * @module
 */
import { writeStdout } from "../../../src/util/stdio.ts";

/** Outcome of a step. */
export type StepOutcome = "ok" | "pending" | "failed" | "info";

/** One reported step. */
export interface StepRecord {
  readonly title: string;
  readonly outcome: StepOutcome;
  readonly detail: string;
  readonly ms: number;
}

const MARKS: Record<StepOutcome, string> = { ok: "✓", pending: "…", failed: "✗", info: "•" };

/** Thrown inside a step to report it as pending on a later issue instead of failed. */
export class PendingError extends Error {
  override name = "PendingError";
  /** `issue` is the number of the issue that will make the step work. */
  constructor(readonly issue: number, message: string) {
    super(message);
  }
}

/**
 * Thrown inside a step to report it as skipped (`•`, not a failure): this environment cannot do
 * it (e.g. the `s3rver` fake lacks an S3 feature), which says nothing about the driver.
 */
export class SkippedError extends Error {
  /** `message` says why. */
  constructor(message: string) {
    super(message);
    this.name = "SkippedError";
  }
}

/** Collects and prints steps. */
export class StepReporter {
  readonly steps: StepRecord[] = [];
  readonly #write: (text: string) => void;

  /** Print with `write` (default: stdout). */
  constructor(write: (text: string) => void = writeStdout) {
    this.#write = write;
  }

  /** Print a free line (headers, hints). */
  line(text = ""): void {
    this.#write(`${text}\n`);
  }

  /** Record an outcome directly. */
  report(title: string, outcome: StepOutcome, detail = "", ms = 0): void {
    this.steps.push({ title, outcome, detail, ms });
    const time = ms ? ` (${(ms / 1000).toFixed(1)} s)` : "";
    const tag = outcome === "pending" ? "pending " : "";
    this.#write(`  ${MARKS[outcome]} ${tag}${title}${detail ? `: ${detail}` : ""}${time}\n`);
  }

  /**
   * Run a step: `✓` with the returned detail, `…` for a {@link PendingError}, `✗` for anything
   * else. Resolves with the step's value, or undefined when it did not succeed.
   */
  async step<T>(
    title: string,
    fn: () => Promise<T>,
    detail?: (v: T) => string,
  ): Promise<T | undefined> {
    const t0 = performance.now();
    try {
      const v = await fn();
      this.report(title, "ok", detail ? detail(v) : "", performance.now() - t0);
      return v;
    } catch (err) {
      const ms = performance.now() - t0;
      if (err instanceof PendingError) {
        this.report(title, "pending", `(issue #${err.issue}) ${err.message}`, ms);
      } else if (err instanceof SkippedError) {
        this.report(title, "info", `skipped: ${err.message}`, ms);
      } else {
        this.report(title, "failed", err instanceof Error ? err.message : String(err), ms);
      }
      return undefined;
    }
  }

  /** True when no step failed. */
  get ok(): boolean {
    return this.steps.every((s) => s.outcome !== "failed");
  }

  /** Counts by outcome. */
  counts(): Record<StepOutcome, number> {
    const c: Record<StepOutcome, number> = { ok: 0, pending: 0, failed: 0, info: 0 };
    for (const s of this.steps) c[s.outcome]++;
    return c;
  }
}
