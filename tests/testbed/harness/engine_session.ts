/**
 * What the session tests and the session benchmark share: a mount served through the supervisor
 * ({@link supervise}), the workload process (`engine_workload.ts`), its report, and the pause a workload
 * saw after an engine was stopped.
 *
 * @module
 */
import { clearCloexec, closeFd, mountFuse, openFuse, unmount } from "../../../src/sys/mount.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { type Running, spawn, waitFor } from "../../_helpers.ts";
import { engineBin, engineEnv, type Server } from "./engine.ts";

const WORKLOAD = new URL("./engine_workload.ts", import.meta.url).pathname;

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

/** A mount served through the supervisor (or by the plain engine). */
export interface Supervised {
  readonly dir: string;
  readonly comm: string;
  readonly proc: Running;
  /** The pid of the engine the supervisor runs now (waits for one). */
  enginePid(): Promise<number>;
  /**
   * Unmount, wait for the supervisor; its exit code and the names it left in the comm dir (read
   * before this removes the dirs).
   */
  stop(): Promise<{ code: number; comm: string[] }>;
}

function childrenOf(pid: number): number[] {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim().split(/\s+/)
      .filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Mount FUSE on a new dir (as the node plugin does), start `s3-csi-supervisor` with mount-s3 on it
 * and a session (as the mounter does), close our fd: the supervisor's custody alone keeps the
 * connection. `session: false` runs mount-s3 alone, without a session (the plain engine).
 */
export async function supervise(
  server: Server,
  bucket: string,
  options: {
    maxRestarts?: number;
    windowMs?: number;
    session?: boolean;
    args?: string[];
    /** Another mount-s3 binary (benchmarks); its s3-csi-supervisor is the one beside ours. */
    bin?: string;
  } = {},
): Promise<Supervised> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-session-mnt-" });
  const state = await Deno.makeTempDir({ prefix: "s3csi-session-" });
  const comm = `${state}/comm`;
  await Deno.mkdir(comm);
  const fd = openFuse();
  let proc: Running;
  try {
    mountFuse(dir, { fd, allowOther: true });
    clearCloexec(fd);
    const id = "0123456789abcdef0123456789abcdef";
    const engine = [
      options.bin ?? engineBin().bin!,
      bucket,
      `/dev/fd/${fd}`,
      "--foreground",
      "--force-path-style",
      "--allow-delete",
      "--allow-overwrite",
      "--allow-other",
      ...(options.args ?? []),
    ];
    proc = options.session === false
      ? spawn(engine[0]!, engine.slice(1), { env: engineEnv(server), clearEnv: true })
      : spawn(engineBin().supervisor!, [
        `--comm-dir=${comm}`,
        `--fuse-fd=${fd}`,
        "--resumable",
        `--session-id=${id}`,
        `--max-restarts=${options.maxRestarts ?? 10}`,
        `--restart-window-ms=${options.windowMs ?? 60_000}`,
        "--",
        ...engine,
        `--session-dir=${state}/session`,
        `--session-id=${id}`,
      ], { env: engineEnv(server), clearEnv: true });
  } catch (err) {
    unmount(dir, { detach: true });
    throw err;
  } finally {
    closeFd(fd); // the supervisor and its engine hold the connection from here on
  }
  const enginePid = () =>
    waitFor("the engine under the supervisor", () => childrenOf(proc.child.pid)[0], {
      timeoutMs: 30_000,
      intervalMs: 10,
    });
  await waitFor("the mount to answer", async () => {
    try {
      await Deno.stat(`${dir}/.`);
      return proc.stdout().includes(" is mounted at ");
    } catch {
      return false;
    }
  }, { timeoutMs: 60_000 });
  return {
    dir,
    comm,
    proc,
    enginePid,
    async stop() {
      if ((await readMountInfo()).some((m) => m.mountPoint === dir)) unmount(dir, { detach: true });
      const code = await proc.stop("SIGTERM", 30_000).catch(() => -1);
      const left = await Array.fromAsync(Deno.readDir(comm)).catch(() => []);
      await Deno.remove(dir).catch(() => {});
      await Deno.remove(state, { recursive: true }).catch(() => {});
      return { code, comm: left.map((e) => e.name).sort() };
    },
  };
}
