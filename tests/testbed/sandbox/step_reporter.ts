/**
 * Step-by-step output of the sandbox: one line per step, `✓` done, `✗` failed, `○` skipped (this
 * environment cannot do it, said why), `•` a note; with durations. A step either completes or
 * fails — there is no "pending": a wait that runs out is a failure naming what it waited for. The
 * reporter is independent of what runs the steps (emulated or real nodes), so every sandbox mode
 * prints, counts and decides its exit code the same way ({@link StepReporter.exitCode}).
 *
 * @module
 */
import { writeStdout } from "../../../src/util/stdio.ts";

/** Outcome of a step. */
export type StepOutcome = "ok" | "failed" | "skipped" | "info";

/** One reported step. */
export interface StepRecord {
  readonly title: string;
  readonly outcome: StepOutcome;
  readonly detail: string;
  readonly ms: number;
}

const MARKS: Record<StepOutcome, string> = { ok: "✓", failed: "✗", skipped: "○", info: "•" };

/**
 * Thrown inside a step to report it as skipped (`○`, not a failure): the environment the user
 * chose cannot do it (e.g. the `s3rver` fake lacks an S3 feature), which says nothing about the
 * driver. Never for a part of the driver that did not work.
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
  /** A skipped step fails the run too (`--scenario`: every step must complete). */
  failOnSkip = false;
  readonly #write: (text: string) => void;

  /** Print with `write` (default: stdout). */
  constructor(write: (text: string) => void = writeStdout) {
    this.#write = write;
  }

  /** Print a free line (headers, hints). */
  line(text = ""): void {
    this.#write(`${text}\n`);
  }

  /**
   * Record an outcome directly. A multi-line `detail` (e.g. a crashed process's last log lines)
   * is printed indented under the step.
   */
  report(title: string, outcome: StepOutcome, detail = "", ms = 0): void {
    this.steps.push({ title, outcome, detail, ms });
    const time = ms ? ` (${(ms / 1000).toFixed(1)} s)` : "";
    const tag = outcome === "skipped" ? "skipped " : "";
    const [first, ...rest] = detail.split("\n");
    const more = rest.map((l) => `\n      ${l}`).join("");
    this.#write(`  ${MARKS[outcome]} ${tag}${title}${first ? `: ${first}` : ""}${time}${more}\n`);
  }

  /**
   * Run a step: `✓` with the returned detail, `○` for a {@link SkippedError}, `✗` for anything
   * else (the error's message says what went wrong or what was waited for). Resolves with the
   * step's value, or undefined when it did not complete.
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
      // The message as it is: a multi-line one (a crash's log tail) is printed indented.
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof SkippedError) this.report(title, "skipped", message, ms);
      else this.report(title, "failed", message, ms);
      return undefined;
    }
  }

  /** True when no step failed (nor was skipped, with {@link failOnSkip}). */
  get ok(): boolean {
    return this.steps.every((s) =>
      s.outcome !== "failed" && !(this.failOnSkip && s.outcome === "skipped")
    );
  }

  /** Counts by outcome. */
  counts(): Record<StepOutcome, number> {
    const c: Record<StepOutcome, number> = { ok: 0, failed: 0, skipped: 0, info: 0 };
    for (const s of this.steps) c[s.outcome]++;
    return c;
  }

  /**
   * Print the closing summary — `N done, N skipped, N failed in T s`, then every failed and
   * skipped step again so the reason is the last thing on screen — and return the exit code: 0
   * only when no step failed.
   */
  finish(seconds: number): number {
    const c = this.counts();
    this.line(`${c.ok} done, ${c.skipped} skipped, ${c.failed} failed in ${seconds.toFixed(1)} s`);
    for (const s of this.steps.filter((x) => x.outcome === "failed" || x.outcome === "skipped")) {
      const why = s.detail.split("\n")[0] ?? "";
      this.line(
        `  ${s.outcome === "failed" ? "FAILED" : "SKIPPED"}: ${s.title}${why ? `: ${why}` : ""}`,
      );
    }
    return this.exitCode();
  }

  /** 0 when no step failed (nor was skipped, with {@link failOnSkip}), else 1. */
  exitCode(): number {
    return this.ok ? 0 : 1;
  }
}
