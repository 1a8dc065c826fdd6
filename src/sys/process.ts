/**
 * {@link ProcessSpawner}: starting an external program (the mounter's FUSE engine) with an exact
 * environment, its stdout passed through and its stderr both passed through and kept (the last
 * bytes) for error reports. An interface so the mounter's logic is unit-tested without spawning.
 *
 * Inherited fds: Deno opens everything `O_CLOEXEC`, so a child inherits only stdio and fds whose
 * `FD_CLOEXEC` the caller cleared on purpose (`clearCloexec`), under the same numbers.
 *
 * @module
 */

/** What to run. */
export interface SpawnSpec {
  /** Program name or path. */
  readonly command: string;
  readonly args: readonly string[];
  /** The complete environment (nothing is inherited). */
  readonly env: Readonly<Record<string, string>>;
  /** Working directory. */
  readonly cwd?: string;
}

/** How a process ended. */
export interface ExitStatus {
  /** Exit code (128 + n when killed by signal n). */
  readonly code: number;
  /** The signal that killed it, if any. */
  readonly signal: string | null;
}

/** A running child. */
export interface SpawnedProcess {
  readonly pid: number;
  /** Resolves when the process has exited and its output is drained. */
  readonly status: Promise<ExitStatus>;
  /** Send a signal; ignored when it already exited. */
  kill(signal: Deno.Signal): void;
  /** The last bytes the process wrote to stderr. */
  stderrTail(): string;
}

/** Starts processes. */
export interface ProcessSpawner {
  /** Absolute path of `name` on `PATH`, or undefined. */
  lookPath(name: string): Promise<string | undefined>;
  /** Start a process. @throws when the program cannot be started */
  spawn(spec: SpawnSpec): SpawnedProcess;
}

/** Bytes of stderr kept by {@link RealSpawner}. */
export const STDERR_TAIL_BYTES = 8192;

/** {@link ProcessSpawner} with `Deno.Command`. */
export class RealSpawner implements ProcessSpawner {
  readonly #path: string;

  /** @param path the `PATH` used by {@link lookPath} */
  constructor(path: string = Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin") {
    this.#path = path;
  }

  /** {@inheritDoc ProcessSpawner.lookPath} */
  async lookPath(name: string): Promise<string | undefined> {
    if (name.includes("/")) return name;
    for (const dir of this.#path.split(":").filter(Boolean)) {
      const candidate = `${dir}/${name}`;
      try {
        const info = await Deno.stat(candidate);
        if (info.isFile && ((info.mode ?? 0) & 0o111) !== 0) return candidate;
      } catch {
        // not here
      }
    }
    return undefined;
  }

  /** {@inheritDoc ProcessSpawner.spawn} */
  spawn(spec: SpawnSpec): SpawnedProcess {
    const child = new Deno.Command(spec.command, {
      args: [...spec.args],
      env: { ...spec.env },
      clearEnv: true,
      ...(spec.cwd ? { cwd: spec.cwd } : {}),
      stdin: "null",
      stdout: "inherit",
      stderr: "piped",
    }).spawn();
    let tail = new Uint8Array(0);
    const pump = (async () => {
      for await (const chunk of child.stderr) {
        await Deno.stderr.write(chunk).catch(() => 0);
        const joined = new Uint8Array(tail.length + chunk.length);
        joined.set(tail);
        joined.set(chunk, tail.length);
        tail = joined.slice(Math.max(0, joined.length - STDERR_TAIL_BYTES));
      }
    })();
    const status = child.status.then(async (s) => {
      await pump.catch(() => {});
      return { code: s.code, signal: s.signal };
    });
    return {
      pid: child.pid,
      status,
      kill: (signal) => {
        try {
          child.kill(signal);
        } catch {
          // already exited
        }
      },
      stderrTail: () => new TextDecoder().decode(tail),
    };
  }
}
