/**
 * One run of a container as a host process: spawned in its own session (so the whole process
 * group is signalled), stdout and stderr appended to a log file, stopped with SIGTERM and, after the
 * grace period, SIGKILL — as the container runtime does on StopContainer.
 *
 * @module
 */
import { dirname } from "node:path";
import { logger } from "../../../src/util/log.ts";
import type { ProcessSpec } from "./container_spec.ts";
import { kubeTime } from "../../../src/kube/time.ts";

/** How a container process ended. */
export interface ProcessExit {
  /** Exit code; 128 + signal number when killed by a signal. */
  readonly exitCode: number;
  readonly signal: Deno.Signal | null;
  readonly startedAt: string;
  readonly finishedAt: string;
}

const SIGNALS: Partial<Record<Deno.Signal, number>> = { SIGKILL: 9, SIGTERM: 15, SIGINT: 2 };

/** A running container process. */
export class ContainerProcess {
  readonly #child: Deno.ChildProcess;
  readonly #log = logger("kubelet", "process");
  readonly #pumps: Promise<void>;
  /** Process id (also the process group id). */
  readonly pid: number;
  readonly startedAt: string;
  /** Resolves when the process has exited and its output is flushed. */
  readonly exited: Promise<ProcessExit>;

  private constructor(child: Deno.ChildProcess, logFile: Deno.FsFile, startedAt: string) {
    this.#child = child;
    this.pid = child.pid;
    this.startedAt = startedAt;
    const writer = logFile;
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream) {
        try {
          await writer.write(chunk);
        } catch { /* log file closed */ }
      }
    };
    this.#pumps = Promise.all([pump(child.stdout), pump(child.stderr)]).then(() => {});
    this.exited = child.status.then(async (s) => {
      // As when a container's init process exits: whatever it left in its group dies too.
      try {
        Deno.kill(-this.pid, "SIGKILL");
      } catch { /* group already empty */ }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.#pumps.catch(() => {}),
        new Promise((r) => timer = setTimeout(r, 2000)),
      ]);
      clearTimeout(timer);
      try {
        logFile.close();
      } catch { /* closed */ }
      const sig = s.signal as Deno.Signal | null;
      return {
        exitCode: sig ? 128 + (SIGNALS[sig] ?? 0) : s.code,
        signal: sig,
        startedAt,
        finishedAt: kubeTime(),
      };
    });
  }

  /** Start `spec` with output appended to `logPath`. @throws when the binary cannot be spawned */
  static async start(spec: ProcessSpec, logPath: string): Promise<ContainerProcess> {
    await Deno.mkdir(dirname(logPath), { recursive: true });
    const logFile = await Deno.open(logPath, { create: true, append: true });
    try {
      const child = new Deno.Command(spec.argv[0]!, {
        args: spec.argv.slice(1),
        env: spec.env,
        clearEnv: true,
        cwd: spec.cwd,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      return new ContainerProcess(child, logFile, kubeTime());
    } catch (err) {
      logFile.close();
      throw err;
    }
  }

  /** Signal the whole process group; false when it is already gone. */
  signal(sig: Deno.Signal): boolean {
    try {
      Deno.kill(-this.pid, sig);
      return true;
    } catch {
      try {
        this.#child.kill(sig);
        return true;
      } catch {
        return false;
      }
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs` (minimum 2 s, like the runtime); resolves on exit. */
  async stop(graceMs: number): Promise<ProcessExit> {
    this.signal("SIGTERM");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const killed = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.#log.info("Container process {pid} did not stop within {graceMs} ms: SIGKILL", {
          pid: this.pid,
          graceMs,
        });
        this.signal("SIGKILL");
        resolve();
      }, Math.max(graceMs, 2000));
    });
    try {
      await Promise.race([this.exited, killed]);
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
