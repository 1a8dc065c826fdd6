/**
 * The real kube-apiserver tier for `deno task sandbox --real-apiserver`: etcd, kube-apiserver and
 * kube-controller-manager started by `tests/testbed/services/kube_real/start.sh` (idempotent; exit 3 = this
 * machine cannot run it) and stopped by `tests/testbed/services/kube_real/stop.sh` — but only when this sandbox
 * started it: a tier that was already running (CI's, another session's) is left running.
 *
 * @module
 */
import { logger } from "../../../src/util/log.ts";
import { REPO_ROOT } from "./child_process.ts";

const log = logger("sandbox", "kube-real");

/** The tier cannot run on this machine (`start.sh` exit 3): no Go, no module proxy, … */
export class RealTierUnavailableError extends Error {
  /** `reason` is start.sh's one-line SKIP reason. */
  constructor(reason: string) {
    super(`the real kube-apiserver tier cannot run here: ${reason}`);
    this.name = "RealTierUnavailableError";
  }
}

/** `start.sh` or `stop.sh` failed (any exit code but 0 and 3, or a timeout). */
export class RealTierError extends Error {
  /** `message` names the script, its exit code and the last line it printed. */
  constructor(message: string) {
    super(message);
    this.name = "RealTierError";
  }
}

/** A running real tier. */
export interface RealTier {
  /** Admin kubeconfig written by start.sh. */
  readonly kubeconfig: string;
  /** True when this process started the tier (and so stops it). */
  readonly startedHere: boolean;
  /** Stop the tier if it was started here; a no-op otherwise. Resolves with what was done. */
  stop(): Promise<string>;
}

/** Bound on start.sh: a cold build of the binaries takes minutes. */
const START_TIMEOUT_MS = 30 * 60_000;
const STOP_TIMEOUT_MS = 120_000;

async function run(
  script: string,
  args: string[],
  logPath: string,
  timeoutMs: number,
  signal: AbortSignal,
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  // stderr goes straight to the log file, not through a pipe of ours: if this process dies, the
  // script still finishes (a closed pipe would kill it mid-way with SIGPIPE).
  await Deno.writeTextFile(logPath, `$ ${script} ${args.join(" ")}\n`, { append: true });
  const offset = (await Deno.stat(logPath)).size;
  const out = await new Deno.Command("bash", {
    args: [
      "-c",
      'exec bash "$0" "$@" 2>>"$KUBE_REAL_SANDBOX_LOG"',
      `${REPO_ROOT}tests/testbed/services/kube_real/${script}`,
      ...args,
    ],
    cwd: REPO_ROOT,
    env: { ...env, KUBE_REAL_SANDBOX_LOG: logPath },
    stdin: "null",
    stdout: "piped",
    stderr: "null",
    signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const log = await Deno.readFile(logPath).catch(() => new Uint8Array());
  const stderr = new TextDecoder().decode(log.subarray(offset));
  if (out.signal) {
    throw new RealTierError(
      `${script} killed by ${out.signal} (timeout ${
        timeoutMs / 1000
      } s or interrupted; log ${logPath})`,
    );
  }
  return { code: out.code, stdout, stderr };
}

function lastLine(text: string): string {
  return text.trim().split("\n").at(-1)?.replace(/^kube_real: (ERROR: )?/, "") ?? "";
}

/**
 * Start (or reuse) the tier; `env` are start.sh's and stop.sh's settings (`KUBE_REAL_STATE`,
 * ports, `KUBE_REAL_SA_ISSUER`, …). @throws {RealTierUnavailableError} when it cannot run here
 * @throws {RealTierError} when start.sh fails
 */
export async function startRealTier(
  logPath: string,
  signal: AbortSignal,
  env: Record<string, string> = {},
): Promise<RealTier> {
  const r = await run("start.sh", [], logPath, START_TIMEOUT_MS, signal, env);
  if (r.code === 3) {
    const skip = /SKIP: (.*)/.exec(r.stderr)?.[1] ?? lastLine(r.stderr);
    throw new RealTierUnavailableError(skip || "start.sh exited with 3");
  }
  if (r.code !== 0) {
    throw new RealTierError(
      `start.sh exited with ${r.code}: ${lastLine(r.stderr)} (log ${logPath})`,
    );
  }
  const kubeconfig = r.stdout.trim().split("\n").at(-1) ?? "";
  if (!kubeconfig) throw new RealTierError(`start.sh printed no kubeconfig path (log ${logPath})`);
  // start.sh says so when it found the tier healthy and reused it.
  const startedHere = !/already running/.test(r.stderr);
  log.info("Real tier {how}: {kubeconfig}", {
    how: startedHere ? "started" : "reused",
    kubeconfig,
  });
  return {
    kubeconfig,
    startedHere,
    async stop() {
      if (!startedHere) return "left running (it was running before the sandbox)";
      const s = await run(
        "stop.sh",
        [],
        logPath,
        STOP_TIMEOUT_MS,
        new AbortController().signal,
        env,
      );
      if (s.code !== 0) {
        throw new RealTierError(`stop.sh exited with ${s.code}: ${lastLine(s.stderr)}`);
      }
      return "stopped (the sandbox had started it)";
    },
  };
}
