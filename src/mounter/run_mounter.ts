/**
 * The mounter process (Mountpoint Pod entrypoint): wires {@link Mounter} to the real system.
 *
 * @module
 */
import type { Engine } from "../mppod/mount_message.ts";
import { RealFiles } from "../sys/files.ts";
import { RealSpawner } from "../sys/process.ts";
import { RealSys } from "../sys/sys.ts";
import type { ParsedConfig } from "../util/config.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { Mounter } from "./mounter.ts";
import type { MOUNTER_OPTIONS } from "../options/mounter_options.ts";

/** Run the mounter; resolves with the exit code. */
export async function runMounter(
  config: ParsedConfig<typeof MOUNTER_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const log = logger("mounter");
  // Engine HOME and caches: a private temp dir, or inside the comm dir when the image's /tmp is
  // not writable (readOnlyRootFilesystem without a /tmp volume).
  const workDir = await Deno.makeTempDir({ prefix: "s3csi-mounter-" }).catch(async () => {
    const dir = `${config["comm-dir"]}/.work-${Deno.pid}`;
    await Deno.mkdir(dir, { mode: 0o700 });
    return dir;
  });
  log.info("Mounter {version} starting (uid {uid}), comm dir {commDir}", {
    version: DRIVER_VERSION,
    uid: Deno.uid(),
    commDir: config["comm-dir"],
  });
  try {
    return await new Mounter({
      sys: new RealSys(),
      files: new RealFiles(),
      spawner: new RealSpawner(),
      commDir: config["comm-dir"],
      workDir,
      receiveTimeoutMs: config["receive-timeout"],
      drainGraceMs: config["drain-grace"],
      engine: config.engine as "auto" | Engine, // checked by the flag's choices
    }).run(signal);
  } finally {
    await Deno.remove(workDir, { recursive: true }).catch(() => {});
  }
}
