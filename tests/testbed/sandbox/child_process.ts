/**
 * The driver's binaries as child processes of the sandbox: started from source with
 * `deno run -A` in a session of their own (`setsid`), output appended to a log file, stopped with
 * SIGTERM then SIGKILL. Any exit that {@link ChildProcess.stop} did not ask for is a crash,
 * recorded with the exit code or signal and the last lines of the log, so the sandbox and the e2e
 * tier can fail on it and show why.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

/** Repository root, with a trailing slash. */
export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** An exit nobody asked for. */
export interface Crash {
  /** Name of the process (e.g. `node plugin node-1`). */
  readonly name: string;
  readonly pid: number;
  readonly code: number;
  /** Signal that ended it, if any. */
  readonly signal: string | null;
  /** When it exited. */
  readonly at: Date;
  /** The last lines of its log at exit (its own last words, e.g. an assertion). */
  readonly logTail: string;
}

/** Lines of a process log kept in a {@link Crash}. */
export const CRASH_LOG_LINES = 30;

/** The last `lines` lines of a log file ("" when unreadable). */
export async function logTail(path: string, lines = CRASH_LOG_LINES): Promise<string> {
  const text = await Deno.readTextFile(path).catch(() => "");
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

/** One line per crash, then its log tail: what the sandbox and the e2e tier print. */
export function describeCrashes(crashes: readonly Crash[]): string {
  return crashes.map((c) =>
    `${c.name} (pid ${c.pid}) exited ${
      c.signal ? `on ${c.signal}` : `with code ${c.code}`
    } at ${c.at.toISOString()}; last log lines:\n${c.logTail || "(empty log)"}`
  ).join("\n");
}

/** A running child. */
export class ChildProcess {
  readonly #child: Deno.ChildProcess;
  readonly #log: Deno.FsFile;
  readonly #pumps: Promise<void>;
  readonly name: string;
  readonly logPath: string;
  /** Exit code once exited. */
  exitCode: number | undefined;
  /** Set when the process exited without {@link stop}: a crash. */
  crash: Crash | undefined;
  readonly status: Promise<number>;
  #stopping = false;

  private constructor(name: string, child: Deno.ChildProcess, log: Deno.FsFile, logPath: string) {
    this.name = name;
    this.#child = child;
    this.#log = log;
    this.logPath = logPath;
    const pump = async (s: ReadableStream<Uint8Array>) => {
      for await (const chunk of s) await log.write(chunk).catch(() => 0);
    };
    this.#pumps = Promise.all([pump(child.stdout), pump(child.stderr)]).then(() => {});
    this.status = child.status.then(async (s) => {
      await this.#pumps.catch(() => {});
      try {
        this.#log.close();
      } catch { /* closed */ }
      if (!this.#stopping) {
        this.crash = {
          name,
          pid: child.pid,
          code: s.code,
          signal: s.signal,
          at: new Date(),
          logTail: await logTail(logPath),
        };
      }
      this.exitCode = s.code;
      return s.code;
    });
  }

  /** Process id. */
  get pid(): number {
    return this.#child.pid;
  }

  /** Start `argv` with `env` (added to PATH/HOME), logging to `logPath`. */
  static async start(
    name: string,
    argv: string[],
    env: Record<string, string>,
    logPath: string,
  ): Promise<ChildProcess> {
    const log = await Deno.open(logPath, { create: true, append: true });
    // A session of its own: Ctrl-C on the sandbox's terminal must not reach the driver processes
    // directly; the sandbox stops them in order (node plugins after the kubelets' unpublishes).
    const child = new Deno.Command("setsid", {
      args: argv,
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        HOME: Deno.env.get("HOME") ?? "/root",
        ...env,
      },
      clearEnv: true,
      cwd: REPO_ROOT,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return new ChildProcess(name, child, log, logPath);
  }

  /** Start one of the repo's binaries from source: `deno run -A src/cmd/<name>/main.ts`. */
  static binary(
    cmd: "node" | "controller" | "mounter",
    args: string[],
    env: Record<string, string>,
    logPath: string,
    name: string = cmd,
  ): Promise<ChildProcess> {
    return ChildProcess.start(
      name,
      [Deno.execPath(), "run", "-A", "--quiet", `${REPO_ROOT}src/cmd/${cmd}/main.ts`, ...args],
      env,
      logPath,
    );
  }

  /** SIGTERM, SIGKILL after `graceMs`; resolves with the exit code. */
  async stop(graceMs = 10_000): Promise<number> {
    if (this.exitCode !== undefined) return this.exitCode;
    this.#stopping = true;
    try {
      this.#child.kill("SIGTERM");
    } catch { /* exited */ }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const kill = new Promise<void>((r) => {
      timer = setTimeout(() => {
        try {
          this.#child.kill("SIGKILL");
        } catch { /* exited */ }
        r();
      }, graceMs);
    });
    await Promise.race([this.status, kill]);
    clearTimeout(timer);
    return await this.status;
  }
}

/** Restarts before a supervised process is considered crash-looping. */
export const MAX_RESTARTS = 5;

/**
 * A child restarted whenever it exits while nobody stops it, as kubelet restarts a DaemonSet
 * container (`restartPolicy: Always`), so one crash does not hide what the rest of a run shows.
 * Every such exit is kept in {@link crashes}: a restart is a failure of the run, never silent.
 * Same surface as {@link ChildProcess}.
 */
export class SupervisedProcess {
  #current: ChildProcess;
  #stopping = false;
  #restarts = 0;
  readonly #crashes: Crash[] = [];
  readonly #start: () => Promise<ChildProcess>;
  readonly #restartDelayMs: number;
  /** Final exit code (after {@link stop}, or a clean exit). */
  exitCode: number | undefined;
  readonly status: Promise<number>;

  private constructor(
    first: ChildProcess,
    start: () => Promise<ChildProcess>,
    restartDelayMs: number,
  ) {
    this.#current = first;
    this.#start = start;
    this.#restartDelayMs = restartDelayMs;
    this.status = this.#watch();
  }

  /** Start the first process with `start` and supervise it. */
  static async start(
    start: () => Promise<ChildProcess>,
    restartDelayMs = 1000,
  ): Promise<SupervisedProcess> {
    return new SupervisedProcess(await start(), start, restartDelayMs);
  }

  async #watch(): Promise<number> {
    for (;;) {
      const code = await this.#current.status;
      if (this.#current.crash) this.#crashes.push(this.#current.crash);
      // A crash loop (e.g. bad configuration) is reported, not hidden: give up after a few.
      if (this.#stopping || this.#restarts >= MAX_RESTARTS) {
        this.exitCode = code;
        return code;
      }
      this.#restarts++;
      await new Promise((r) => setTimeout(r, this.#restartDelayMs));
      if (this.#stopping) {
        this.exitCode = code;
        return code;
      }
      this.#current = await this.#start();
    }
  }

  /** Name of the process. */
  get name(): string {
    return this.#current.name;
  }

  /** Log file (shared by every restart). */
  get logPath(): string {
    return this.#current.logPath;
  }

  /** Process id of the current process. */
  get pid(): number {
    return this.#current.pid;
  }

  /** How many times the process was restarted. */
  get restarts(): number {
    return this.#restarts;
  }

  /** Every exit nobody asked for (each followed by a restart, up to {@link MAX_RESTARTS}). */
  get crashes(): readonly Crash[] {
    return this.#crashes;
  }

  /** Stop for good: SIGTERM, SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<number> {
    this.#stopping = true;
    await this.#current.stop(graceMs);
    return await this.status;
  }
}

/** The last warning or error line of a process log, shortened; undefined when there is none. */
export async function lastProblem(path: string | undefined): Promise<string | undefined> {
  if (!path) return undefined;
  const text = await Deno.readTextFile(path).catch(() => "");
  const line = text.trim().split("\n").findLast((l) =>
    /\[(WRN|ERR|FTL)\]|"level":"(WARN|ERROR|FATAL)/i.test(l)
  );
  return line?.replace(/^.*?\[(WRN|ERR|FTL)\]\s*/, "").slice(0, 240);
}
