/**
 * The mounter process (Mountpoint Pod entrypoint). Receiving the FUSE fd and running the engine
 * arrive with issue #6; until then the binary validates its configuration and comm dir, and exits
 * with {@link MOUNTER_EXIT_NO_MESSAGE} and a message saying that fd receiving is not available, so a
 * Mountpoint Pod never pretends to serve a mount.
 *
 * @module
 */
import { ConfigError } from "../util/errors.ts";
import type { ParsedConfig } from "../util/config.ts";
import { logger } from "../util/log.ts";
import { MOUNTER_EXIT_NO_MESSAGE } from "../mppod/exit_codes.ts";
import type { MOUNTER_OPTIONS } from "./mounter_options.ts";

/** Run the mounter; resolves with the exit code. */
export async function runMounter(
  config: ParsedConfig<typeof MOUNTER_OPTIONS>,
  _signal: AbortSignal,
): Promise<number> {
  const log = logger("mounter");
  const dir = config["comm-dir"];
  const info = await Deno.stat(dir).catch(() => undefined);
  if (!info?.isDirectory) {
    throw new ConfigError(
      `comm dir "${dir}" does not exist or is not a directory: mount the comm emptyDir there`,
    );
  }
  log.error("This build cannot receive mount requests yet (fd passing lands with issue #6)", {
    commDir: dir,
  });
  return MOUNTER_EXIT_NO_MESSAGE;
}
