/**
 * Handing a FUSE fd and its mount message to a Mountpoint Pod's mounter: connect to its
 * `mount.sock` through a descriptor of the socket file itself (no link followed), retrying while
 * it is missing or refuses (the mounter is starting, or restarting with a new socket), and send
 * the message with the fd in one `sendmsg`. Used by the publisher (a new source mount) and by the
 * custody (the same fd again, to a restarted Mountpoint container).
 *
 * @module
 */
import { MOUNT_SOCK } from "../mppod/paths.ts";
import type { DirHandle } from "../sys/files.ts";
import type { Sys, SysConn } from "../sys/sys.ts";
import { TimeoutError } from "../util/errors.ts";
import { sleep } from "../util/sleep.ts";

/** Options of {@link handOver}. */
export interface HandOverOptions {
  /** How long to keep trying to connect. */
  readonly connectMs: number;
  /** Sending the message, once connected. @default 10000 */
  readonly sendMs?: number;
  readonly signal: AbortSignal;
}

/**
 * Connect to `comm`'s `mount.sock` and send `bytes` with `fd`.
 * @throws the last connection error, a {@link TimeoutError}, or an `UnsafeEntryError` when the
 *   pod put something else than a socket there
 */
export async function handOver(
  sys: Sys,
  comm: DirHandle,
  bytes: Uint8Array,
  fd: number,
  options: HandOverOptions,
): Promise<void> {
  const conn = await connect(sys, comm, options);
  try {
    await sys.sendWithFd(conn, bytes, fd, {
      timeoutMs: options.sendMs ?? 10_000,
      signal: options.signal,
    });
  } finally {
    conn.close();
  }
}

async function connect(sys: Sys, comm: DirHandle, o: HandOverOptions): Promise<SysConn> {
  const deadline = performance.now() + o.connectMs;
  let last: unknown;
  for (;;) {
    o.signal.throwIfAborted();
    const left = deadline - performance.now();
    if (left <= 0) throw last ?? new TimeoutError(`${comm.path}/${MOUNT_SOCK}`, o.connectMs);
    const via = await comm.socketPath(MOUNT_SOCK);
    if (via) {
      try {
        return await sys.connectUnix(via.path, {
          timeoutMs: Math.min(left, 1000),
          signal: o.signal,
        });
      } catch (err) {
        if (o.signal.aborted) throw err;
        last = err;
      } finally {
        via[Symbol.dispose]();
      }
    } else {
      await sleep(Math.min(left, 50), o.signal);
    }
  }
}
