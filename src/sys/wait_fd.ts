/**
 * Bounded, cancellable waiting for a file descriptor, without blocking the event loop.
 *
 * The wait is `poll([fd, eventfd])` declared `nonblocking: true`, so it runs on a Deno
 * blocking-pool thread while the JS thread keeps serving timers and I/O. Each call lasts at most
 * {@link POLL_SLICE_MS}, and aborting the signal writes to the eventfd, which ends the pending
 * `poll` at once; a blocking-pool thread is therefore never held for long.
 *
 * @module
 */
import { TimeoutError } from "../util/errors.ts";
import { SysError } from "./errno.ts";
import {
  alloc,
  check,
  EFD_CLOEXEC,
  EFD_NONBLOCK,
  libc,
  POLLERR,
  POLLHUP,
  POLLIN,
  POLLNVAL,
} from "./libc.ts";

/** Longest single `poll` call; the loop re-checks the deadline and the signal in between. */
export const POLL_SLICE_MS = 1000;

/** Options of a bounded wait. */
export interface WaitOptions {
  /** Cancels the wait; it then rejects with `signal.reason`. */
  readonly signal?: AbortSignal | undefined;
  /** Give up after this many milliseconds with a {@link TimeoutError}. */
  readonly timeoutMs: number;
}

/** Options of {@link waitFd}. */
export interface WaitFdOptions extends WaitOptions {
  /** What is awaited, for the timeout message. @default "file descriptor <fd>" */
  readonly what?: string;
}

const EVENTFD_ONE = new BigUint64Array([1n]);

/**
 * Wait until `fd` reports one of `events` (`POLLIN`, `POLLOUT`), or an error/hang-up condition.
 * Returns the `revents` bits.
 *
 * @throws {TimeoutError} when `timeoutMs` passes first
 * @throws `signal.reason` when the signal aborts
 * @throws {SysError} `EBADF` when `fd` is not open (`POLLNVAL`)
 */
export async function waitFd(fd: number, events: number, options: WaitFdOptions): Promise<number> {
  const { signal, timeoutMs } = options;
  signal?.throwIfAborted();
  const deadline = performance.now() + timeoutMs;
  const wake = check(libc().eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd");
  const onAbort = () => libc().write(wake, EVENTFD_ONE, 8n);
  signal?.addEventListener("abort", onAbort, { once: true });
  // pollfd[2]: { i32 fd; i16 events; i16 revents }; kept in its own ArrayBuffer (read by a thread).
  const fds = alloc(16);
  const view = new DataView(fds.buffer);
  try {
    for (;;) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new TimeoutError(options.what ?? `file descriptor ${fd}`, timeoutMs);
      }
      view.setInt32(0, fd, true);
      view.setInt16(4, events, true);
      view.setInt16(6, 0, true);
      view.setInt32(8, wake, true);
      view.setInt16(12, POLLIN, true);
      view.setInt16(14, 0, true);
      const slice = Math.max(1, Math.min(POLL_SLICE_MS, Math.ceil(remaining)));
      const n = await libc().pollAsync(fds, 2n, slice);
      signal?.throwIfAborted();
      if (n <= 0) continue; // timeout slice, or EINTR (errno of the pool thread is not readable)
      const revents = view.getInt16(6, true);
      if (revents & POLLNVAL) throw new SysError(9, "poll");
      if (revents & (events | POLLERR | POLLHUP)) return revents;
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    libc().close(wake);
  }
}
