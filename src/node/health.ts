/**
 * Is a mount alive? {@link HealthChecker} stats its root, then opens it ({@link Files.touchDir}),
 * bounded by a timeout: a dead FUSE server answers `ENOTCONN`; a hung one never answers, which
 * counts as unhealthy after the timeout.
 *
 * The `stat` alone is not enough: the kernel answers it from its attribute cache, so a mount whose
 * engine was killed still "stats" fine for as long as the engine's attribute timeout (seen: a
 * republish right after the engine was killed returned "already published" and repaired nothing).
 * Opening the directory is always a round trip to the FUSE server (`OPENDIR`), and a cheap one: no
 * listing, no S3 request.
 *
 * Four answers ({@link HealthState}): `ok`; `dead` (the mount answered with an error, e.g.
 * `ENOTCONN` after its connection ended, or `EIO` from a supervisor that gave its engine up); `hung`
 * (no answer within the timeout: an engine restarting, or stuck); `unknown` (not checked: too many
 * other mounts hang). Only `dead`, and `hung` for longer than its owner tolerates, are reasons to
 * repair a mount; `unknown` never is.
 *
 * Thread use is bounded. Each probe is an async file-system call that holds one of the runtime's
 * blocking threads until the kernel answers — forever on a hung mount. So at most one probe per
 * `key` is ever in flight: the Mountpoint Pod whose mount it is (its source path; a source and all
 * its bind mounts share it, and so do all the connections one pod was given over time), so that a
 * pod cannot strand more than one probe however often it is mounted again. Concurrent checks share
 * the probe, and once it has outlived the timeout every later check answers "hung" at once without
 * starting another. Whoever gives up a hung connection aborts it (fusectl), which ends its probe. A
 * global cap bounds the rest.
 *
 * @module
 */
import type { Files } from "../sys/files.ts";
import { errorMessage } from "../util/errors.ts";

/** What a check found. */
export type HealthState = "ok" | "dead" | "hung" | "unknown";

/** Result of a health check. */
export type MountHealth =
  | { readonly ok: true; readonly state: "ok" }
  | {
    readonly ok: false;
    readonly state: Exclude<HealthState, "ok">;
    readonly problem: string;
    /** For `hung`: how long the probe has been waiting, in milliseconds. */
    readonly sinceMs?: number;
  };

/** The healthy answer. */
export const HEALTHY: MountHealth = Object.freeze({ ok: true, state: "ok" });

/** Options of {@link HealthChecker}. */
export interface HealthCheckerOptions {
  /** How long a check waits for the probe. @default 3000 */
  readonly timeoutMs?: number;
  /** Probes in flight at once, over all mounts. @default 64 */
  readonly maxInFlight?: number;
}

interface Probe {
  readonly started: number;
  readonly result: Promise<MountHealth>;
}

/**
 * Whether a mount must be repaired (its source mounted again): it answered with an error, or it
 * has not answered for `toleranceMs` (0: any hang; longer for a session the node plugin holds,
 * whose engine is being restarted). Never for `unknown`.
 */
export function needsRepair(h: MountHealth, toleranceMs: number): boolean {
  if (h.ok || h.state === "unknown") return false;
  return h.state === "dead" || (h.sinceMs ?? 0) >= toleranceMs;
}

/** Bounded, shared health checks of mounts. */
export class HealthChecker {
  readonly #files: Files;
  readonly #timeoutMs: number;
  readonly #max: number;
  readonly #inFlight = new Map<string, Probe>();

  /** Create a checker on `files`. */
  constructor(files: Files, options: HealthCheckerOptions = {}) {
    this.#files = files;
    this.#timeoutMs = options.timeoutMs ?? 3000;
    this.#max = options.maxInFlight ?? 64;
  }

  /** Probes in flight (each holds at most one blocking thread). */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * Check the mount at `path`. `key` names whose mount it is (the Mountpoint Pod's source path, or
   * the connection's `majorMinor` when no source is known); paths with the same key share one
   * probe. Never rejects.
   */
  async check(path: string, key: string = path, signal?: AbortSignal): Promise<MountHealth> {
    let probe = this.#inFlight.get(key);
    if (probe && performance.now() - probe.started >= this.#timeoutMs) {
      return hung(path, performance.now() - probe.started);
    }
    if (!probe) {
      if (this.#inFlight.size >= this.#max) {
        return {
          ok: false,
          state: "unknown",
          problem: `"${path}" was not checked: ${this.#max} other mounts do not answer`,
        };
      }
      probe = { started: performance.now(), result: this.#probe(path) };
      const mine = probe;
      this.#inFlight.set(key, mine);
      void mine.result.finally(() => {
        if (this.#inFlight.get(key) === mine) this.#inFlight.delete(key);
      });
    }
    const remaining = Math.max(0, this.#timeoutMs - (performance.now() - probe.started));
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const started = probe.started;
    try {
      return await Promise.race([
        probe.result,
        new Promise<MountHealth>((resolve) => {
          timer = setTimeout(() => resolve(hung(path, performance.now() - started)), remaining);
          onAbort = () =>
            resolve({ ok: false, state: "unknown", problem: `check of "${path}" cancelled` });
          signal?.addEventListener("abort", onAbort, { once: true });
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    }
  }

  async #probe(path: string): Promise<MountHealth> {
    try {
      const s = await this.#files.stat(path);
      if (!s) return { ok: false, state: "dead", problem: `"${path}" does not exist` };
      if (s.isDirectory) await this.#files.touchDir(path);
      return HEALTHY;
    } catch (err) {
      return { ok: false, state: "dead", problem: errorMessage(err) };
    }
  }
}

function hung(path: string, ms: number): MountHealth {
  return {
    ok: false,
    state: "hung",
    problem: `"${path}" did not answer within ${Math.round(ms)} ms (hung)`,
    sinceMs: ms,
  };
}
