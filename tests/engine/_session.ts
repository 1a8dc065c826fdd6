/**
 * What the session tests share: the workload process (`_workload.ts`), its report, and the pause a
 * workload saw after an engine was stopped.
 *
 * @module
 */
import { type Running, spawn } from "../_helpers.ts";

const WORKLOAD = new URL("./_workload.ts", import.meta.url).pathname;

/** One operation of the workload (epoch milliseconds). */
export interface WorkloadOp {
  readonly op: string;
  readonly start: number;
  readonly end: number;
  readonly error?: string;
}

/** What the workload reports when it stops. */
export interface WorkloadReport {
  readonly ops: WorkloadOp[];
  /** Files it wrote and closed: name → sha256. */
  readonly written: Record<string, string>;
  /** The held-open file as it read it. */
  readonly held: { readonly bytes: number; readonly sha256: string };
  readonly iterations: number;
}

/** A running workload. */
export interface Workload {
  readonly proc: Running;
  /** Operations done so far are in the report only at the end; this waits for `n` iterations. */
  stop(): Promise<WorkloadReport>;
}

/**
 * Start the workload in `dir` (its cwd), holding `held` (relative to `dir`) open for reading;
 * `uid` runs it as that user (through setpriv) when given.
 */
export function startWorkload(
  dir: string,
  held: string,
  options: { readonly uid?: number; readonly env?: Record<string, string> } = {},
): Workload {
  const state = Deno.makeTempDirSync({ prefix: "s3csi-workload-" });
  Deno.chmodSync(state, 0o777);
  const stopFile = `${state}/stop`;
  const report = `${state}/report.json`;
  const deno = [Deno.execPath(), "run", "-A", "--quiet", WORKLOAD, dir, held, stopFile, report];
  const env = { PATH: "/usr/bin:/bin", HOME: state, ...options.env };
  const proc = options.uid === undefined ? spawn(deno[0]!, deno.slice(1), { env }) : spawn(
    "setpriv",
    [`--reuid=${options.uid}`, `--regid=${options.uid}`, "--clear-groups", ...deno],
    { env },
  );
  return {
    proc,
    async stop() {
      Deno.writeTextFileSync(stopFile, "");
      const status = await proc.child.status;
      try {
        if (!status.success) {
          throw new Error(`the workload exited with ${status.code}: ${proc.stderr().slice(-2000)}`);
        }
        return JSON.parse(await Deno.readTextFile(report)) as WorkloadReport;
      } finally {
        await Deno.remove(state, { recursive: true }).catch(() => {});
      }
    },
  };
}

/**
 * The failed operations of a report, as lines, except what the design lets fail: a write whose
 * file was open for writing when an engine died (`stops`, epoch ms) gets EIO (its unfinished upload
 * died with the engine; README "What survives what"). Those are returned apart.
 */
export function workloadErrors(
  r: WorkloadReport,
  stops: readonly number[] = [],
): string[] {
  return r.ops.filter((o) => o.error && !lostWrite(o, stops)).map((o) =>
    `${o.op} at ${o.start}: ${o.error}`
  );
}

/** Writes that failed with EIO because their file was open for writing when an engine died. */
export function lostWrites(r: WorkloadReport, stops: readonly number[]): WorkloadOp[] {
  return r.ops.filter((o) => o.error && lostWrite(o, stops));
}

function lostWrite(o: WorkloadOp, stops: readonly number[]): boolean {
  return o.op === "write" && /Input\/output error|os error 5\b/.test(o.error ?? "") &&
    stops.some((t) => o.start <= t && t <= o.end);
}

/**
 * How long the workload waited after `at` (epoch ms, e.g. a kill): from `at` to the end of the
 * first operation that completed after it. Undefined when none did.
 */
export function pauseAfter(r: WorkloadReport, at: number): number | undefined {
  const ends = r.ops.filter((o) => !o.error && o.end > at).map((o) => o.end);
  return ends.length ? Math.min(...ends) - at : undefined;
}

/** The `p`-th percentile (0-100) of `values` (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  ]!;
}
