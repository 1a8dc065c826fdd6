/**
 * Waiting until a freshly mounted FUSE file system answers. `mount(2)` and bind mounts return
 * before the server has handled `FUSE_INIT`; the first `stat` of the mount root waits for it. The
 * stat runs asynchronously (on a blocking-pool thread) and is raced against the deadline and the
 * signal. When the time is up the FUSE connection is aborted, which also releases the pending
 * stat, so no thread stays stuck on a server that never answers.
 *
 * @module
 */
import { TimeoutError } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { abortFuseConnection } from "./mount.ts";
import { findMount, readMountInfo } from "./mountinfo.ts";
import type { WaitOptions } from "./wait_fd.ts";

const log = logger("sys", "mount_ready");

/** Options of {@link waitMountReady}. */
export interface WaitMountReadyOptions extends WaitOptions {
  /**
   * Abort the FUSE connection of `path` when the wait times out or is cancelled, so that the
   * pending stat (and every other request) fails with `ENOTCONN`. @default true
   */
  readonly abortOnFailure?: boolean;
}

/**
 * Resolve once `stat(path)` succeeds, i.e. the FUSE server answered `FUSE_INIT` and `GETATTR`.
 * @throws {TimeoutError} @throws `signal.reason` @throws the stat error (`ENOTCONN` when the
 *   server died)
 */
export async function waitMountReady(path: string, options: WaitMountReadyOptions): Promise<void> {
  const { signal, timeoutMs } = options;
  signal?.throwIfAborted();
  const stat = Deno.stat(path).then(() => undefined);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new TimeoutError(`FUSE mount "${path}" to answer`, timeoutMs)),
      timeoutMs,
    );
    onAbort = () => reject(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  try {
    await Promise.race([stat, stop]);
  } catch (err) {
    if (options.abortOnFailure ?? true) await abortMountAt(path);
    stat.catch(() => {}); // settles with ENOTCONN after the abort; nothing waits for it
    throw err;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

async function abortMountAt(path: string): Promise<void> {
  const mount = findMount(await readMountInfo(), path);
  if (mount === undefined || !(mount.fsType === "fuse" || mount.fsType.startsWith("fuse."))) return;
  const result = await abortFuseConnection(mount.minor);
  log.warn("FUSE mount {path} did not become ready; connection {minor}: {result}", {
    path,
    minor: mount.minor,
    result,
  });
}
