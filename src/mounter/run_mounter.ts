/**
 * The mounter process (Mountpoint Pod entrypoint): prepares its private work dir and wires
 * {@link Mounter} to the real system.
 *
 * The mounter is PID 1 of its container and its volumes outlive container restarts, so every
 * start must succeed whatever an earlier run left: the work dir (its own `work` emptyDir, never
 * the comm dir, which is small, memory-backed, holds the credentials and is shared with the node
 * plugin) is emptied first; leftovers of older versions in the comm dir (`.work-<pid>` dirs) are
 * removed; a stale `mount.sock` is replaced by the listener.
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

/** Empty `dir` (keeping it), so a restarted mounter never meets its previous run's files. */
export async function emptyDir(dir: string): Promise<number> {
  let removed = 0;
  for await (const e of Deno.readDir(dir)) {
    await Deno.remove(`${dir}/${e.name}`, { recursive: true });
    removed++;
  }
  return removed;
}

/**
 * The work dir to use: `configured`, emptied. When it is the default and does not exist (a
 * Mountpoint Pod made by an older controller, without the `work` volume), a private temp dir.
 * @throws {ConfigError} when it cannot be used, or lies inside the comm dir
 */
export async function prepareWorkDir(configured: string, commDir: string): Promise<string> {
  const norm = (p: string) => p.replace(/\/+$/, "");
  if (norm(configured) === norm(commDir) || norm(configured).startsWith(`${norm(commDir)}/`)) {
    throw new ConfigError(
      `--work-dir "${configured}" is inside the comm dir "${commDir}": give the mounter its own emptyDir`,
    );
  }
  try {
    const removed = await emptyDir(configured);
    if (removed) {
      log.info("Emptied the work dir {dir} ({removed} entries of an earlier run)", {
        dir: configured,
        removed,
      });
    }
    return configured;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound && configured === WORK_DIR) {
      return await Deno.makeTempDir({ prefix: "s3csi-mounter-" }).catch((e) => {
        throw new ConfigError(
          `The mounter has no work dir: ${WORK_DIR} does not exist and no temp dir can be made (${
            errorMessage(e)
          }); mount an emptyDir at ${WORK_DIR}`,
        );
      });
    }
    throw new ConfigError(`The work dir "${configured}" cannot be used: ${errorMessage(err)}`);
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
  const workDir = await prepareWorkDir(config["work-dir"], commDir);
  await cleanCommLeftovers(commDir);
  try {
    return await new Mounter({
      sys: new RealSys(),
      files: new RealFiles(),
      spawner: new RealSpawner(),
      commDir,
      workDir,
      receiveTimeoutMs: config["receive-timeout"],
      drainGraceMs: config["drain-grace"],
      engine: config.engine as "auto" | Engine, // checked by the flag's choices
    }).run(signal);
  } finally {
    if (workDir !== config["work-dir"]) {
      await Deno.remove(workDir, { recursive: true }).catch(() => {});
    }
  }
}
