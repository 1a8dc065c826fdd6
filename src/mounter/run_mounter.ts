/**
 * The mounter process (Mountpoint Pod entrypoint): checks its directories, prepares its private
 * working dir and wires {@link Mounter} to the real system.
 *
 * The mounter is PID 1 of its container and its volumes outlive container restarts, so every
 * start must succeed whatever an earlier run left. Its files live in the `work` emptyDir (never
 * the comm dir, which is small, memory-backed, holds the credentials and is shared with the node
 * plugin), in a fresh `run-<id>` dir per start; what earlier runs left is removed — and only that:
 * (the engine's `session/` dir beside the run dirs is the engine's, kept across restarts);
 * a run dir is removed only when it carries the mounter's marker file, so a misconfigured work dir
 * (a host directory, a shared volume) never loses anything the mounter did not create. Leftovers
 * of older versions in the comm dir (`.work-<pid>` dirs) are removed; a stale `mount.sock` is
 * replaced by the listener. Nothing is touched before the flags and both directories are checked.
 *
 * @module
 */
import { WORK_DIR } from "../mppod/paths.ts";
import type { Engine } from "../mppod/mount_message.ts";
import { RealFiles } from "../sys/files.ts";
import { RealSpawner } from "../sys/process.ts";
import { RealSys } from "../sys/sys.ts";
import type { ParsedConfig } from "../util/config.ts";
import { ConfigError, errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { Mounter } from "./mounter.ts";
import type { MOUNTER_OPTIONS } from "../options/mounter_options.ts";

const log = logger("mounter");

/** Name prefix of the per-start dirs in the work dir. */
export const RUN_DIR_PREFIX = "run-";
/** Marker file in every run dir: only marked dirs are ever removed. */
export const RUN_DIR_MARKER = ".s3-csi-mounter-run";
/** The engine's session dir in the work volume (never a run dir: it outlives container restarts). */
export const SESSION_DIR = "session";

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await Deno.lstat(path)).isDirectory;
  } catch {
    return false;
  }
}

/** Remove the run dirs an earlier mounter left in `workDir` (marked ones only; not `current`). */
export async function removeEarlierRuns(workDir: string, current?: string): Promise<number> {
  let removed = 0;
  for await (const e of Deno.readDir(workDir)) {
    if (!e.isDirectory || !e.name.startsWith(RUN_DIR_PREFIX)) continue;
    const dir = `${workDir}/${e.name}`;
    if (dir === current) continue;
    const marker = await Deno.lstat(`${dir}/${RUN_DIR_MARKER}`).catch(() => undefined);
    if (!marker?.isFile) continue;
    await Deno.remove(dir, { recursive: true });
    removed++;
  }
  return removed;
}

/**
 * A fresh, marked run dir inside `configured` (the earlier runs' removed). When `configured` is
 * the default and does not exist (a Mountpoint Pod made by an older controller, without the
 * `work` volume), a private temp dir instead.
 * @throws {ConfigError} when the work dir cannot be used, or lies inside the comm dir
 */
export async function prepareWorkDir(configured: string, commDir: string): Promise<string> {
  const norm = (p: string) => p.replace(/\/+$/, "") || "/";
  if (norm(configured) === norm(commDir) || norm(configured).startsWith(`${norm(commDir)}/`)) {
    throw new ConfigError(
      `--work-dir "${configured}" is inside the comm dir "${commDir}": give the mounter its own emptyDir`,
    );
  }
  const tempDir = () =>
    Deno.makeTempDir({ prefix: "s3csi-mounter-" }).catch((e) => {
      throw new ConfigError(
        `The mounter has no work dir: ${WORK_DIR} is missing or not writable and no temp dir can be made (${
          errorMessage(e)
        }); mount an emptyDir at ${WORK_DIR}`,
      );
    });
  if (!(await isDirectory(configured))) {
    if (configured !== WORK_DIR) {
      throw new ConfigError(`work dir "${configured}" does not exist or is not a directory`);
    }
    return await tempDir();
  }
  try {
    const run = await Deno.makeTempDir({ dir: configured, prefix: RUN_DIR_PREFIX });
    await Deno.writeTextFile(`${run}/${RUN_DIR_MARKER}`, "");
    const removed = await removeEarlierRuns(configured, run);
    if (removed) {
      log.info("Removed {removed} run dirs of earlier runs from {dir}", {
        dir: configured,
        removed,
      });
    }
    return run;
  } catch (err) {
    // The default path exists but is not ours to write (a Pod without the work volume on a host
    // that has such a directory): a private temp dir, as when it is missing.
    if (
      configured === WORK_DIR &&
      (err instanceof Deno.errors.PermissionDenied || (err as { code?: string }).code === "EROFS")
    ) {
      return await tempDir();
    }
    throw new ConfigError(`The work dir "${configured}" cannot be used: ${errorMessage(err)}`);
  }
}

/**
 * The cache dir must be a directory of its own (the pod's cache volume), not the comm dir or
 * inside it. The engine manages its content (mount-s3 keeps its blocks in a `mountpoint-cache`
 * dir it creates, empties at start and removes at unmount); the mounter removes nothing there.
 * @throws {ConfigError}
 */
export async function checkCacheDir(cacheDir: string, commDir: string): Promise<void> {
  const norm = (p: string) => p.replace(/\/+$/, "") || "/";
  if (norm(cacheDir) === norm(commDir) || norm(cacheDir).startsWith(`${norm(commDir)}/`)) {
    throw new ConfigError(
      `--cache-dir "${cacheDir}" is inside the comm dir "${commDir}": mount the cache volume elsewhere`,
    );
  }
  if (!(await isDirectory(cacheDir))) {
    throw new ConfigError(
      `cache dir "${cacheDir}" (MOUNTER_CACHE_DIR) does not exist or is not a directory: mount the cache volume there`,
    );
  }
}

/** Remove what older mounters left in the comm dir (`.work-<pid>` fallbacks). */
async function cleanCommLeftovers(commDir: string): Promise<void> {
  try {
    for await (const e of Deno.readDir(commDir)) {
      if (e.isDirectory && /^\.work-\d+$/.test(e.name)) {
        await Deno.remove(`${commDir}/${e.name}`, { recursive: true });
        log.info("Removed {name} left in the comm dir by an earlier mounter", { name: e.name });
      }
    }
  } catch (err) {
    log.warn("Could not clean the comm dir: {error}", { error: errorMessage(err) });
  }
}

/** Run the mounter; resolves with the exit code. */
export async function runMounter(
  config: ParsedConfig<typeof MOUNTER_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const commDir = config["comm-dir"];
  log.info("Mounter {version} starting (uid {uid}), comm dir {commDir}", {
    version: DRIVER_VERSION,
    uid: Deno.uid(),
    commDir,
  });
  if (!(await isDirectory(commDir))) {
    throw new ConfigError(
      `comm dir "${commDir}" does not exist or is not a directory: mount the comm emptyDir there`,
    );
  }
  const cacheDir = config["cache-dir"] || undefined;
  if (cacheDir !== undefined) await checkCacheDir(cacheDir, commDir);
  const workDir = await prepareWorkDir(config["work-dir"], commDir);
  await cleanCommLeftovers(commDir);
  // The engine's session table lives in the work volume itself (not in a run dir, which the next
  // start removes), so a restarted container can resume the session. Not in a temp-dir fallback.
  const volume = config["work-dir"].replace(/\/+$/, "");
  const sessionDir = workDir.startsWith(`${volume}/`) ? `${volume}/${SESSION_DIR}` : undefined;
  try {
    return await new Mounter({
      sys: new RealSys(),
      files: new RealFiles(),
      spawner: new RealSpawner(),
      commDir,
      workDir,
      cacheDir,
      sessionDir,
      caBundle: config["ca-bundle"] || undefined,
      metrics: { port: config["metrics-port"], labels: config["metrics-labels"] },
      receiveTimeoutMs: config["receive-timeout"],
      drainGraceMs: config["drain-grace"],
      engine: config.engine as "auto" | Engine, // checked by the flag's choices
    }).run(signal);
  } finally {
    await Deno.remove(workDir, { recursive: true }).catch(() => {});
  }
}
