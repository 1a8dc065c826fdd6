/**
 * Passing file descriptors over a unix stream socket with `SCM_RIGHTS`, in the upstream wire
 * format (`mppod/mount_message.ts`): the sender makes **one** `sendmsg` carrying the payload and
 * the fd(s), then closes; the receiver reads until EOF and collects the fds.
 *
 * Struct layouts (x86_64 and aarch64, little endian):
 * `iovec { void* base @0; size_t len @8 }` (16 B);
 * `msghdr { void* name @0; u32 namelen @8; iovec* iov @16; size_t iovlen @24; void* control @32;
 * size_t controllen @40; i32 flags @48 }` (56 B);
 * `cmsghdr { size_t len @0; i32 level @8; i32 type @12; data @16 }`, padded to 8 bytes.
 *
 * @module
 */
import { TimeoutError } from "../util/errors.ts";
import { isErrno } from "./errno.ts";
import {
  addressOf,
  alloc,
  check,
  libc,
  MSG_CMSG_CLOEXEC,
  MSG_CTRUNC,
  MSG_NOSIGNAL,
  POLLIN,
  POLLOUT,
  SCM_RIGHTS,
  SOL_SOCKET,
} from "./libc.ts";
import { type UnixConn, waitSignal } from "./unix_socket.ts";
import { waitFd, type WaitOptions } from "./wait_fd.ts";

/** Why a message was refused. */
export type FdPassingProblem = "short-write" | "control-truncated" | "too-large" | "fd-count";

/** A message that breaks the protocol; received fds have already been closed. */
export class FdPassingError extends Error {
  override name = "FdPassingError";
  /** Create an error for `problem`. */
  constructor(readonly problem: FdPassingProblem, message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Default room for fds in the receive control buffer; more than this is `control-truncated`. */
export const DEFAULT_MAX_FDS = 8;
const CMSG_HEADER = 16;
const RECV_CHUNK = 64 * 1024;

function align8(n: number): number {
  return (n + 7) & ~7;
}

/** `CMSG_SPACE` for `n` fds. */
function cmsgSpace(fds: number): number {
  return CMSG_HEADER + align8(4 * fds);
}

/** Build a msghdr pointing at `data` (one iovec) and `control`. */
function msghdr(data: Uint8Array<ArrayBuffer>, control: Uint8Array<ArrayBuffer> | undefined) {
  const iov = alloc(16);
  const iv = new DataView(iov.buffer);
  iv.setBigUint64(0, addressOf(data), true);
  iv.setBigUint64(8, BigInt(data.length), true);
  const msg = alloc(56);
  const mv = new DataView(msg.buffer);
  mv.setBigUint64(16, addressOf(iov), true);
  mv.setBigUint64(24, 1n, true);
  if (control !== undefined && control.length > 0) {
    mv.setBigUint64(32, addressOf(control), true);
    mv.setBigUint64(40, BigInt(control.length), true);
  }
  return { msg, mv, iov };
}

/** Options of {@link sendWithFds}. */
export type SendOptions = WaitOptions;

/**
 * Send `bytes` and `fds` in one `sendmsg` (`MSG_NOSIGNAL`). The fds stay open here; the caller
 * closes its copies afterwards. A short write is an error: the protocol has no continuation.
 * @throws {FdPassingError} `short-write` @throws {TimeoutError} @throws {SysError} e.g. `EPIPE`
 */
export async function sendWithFds(
  conn: UnixConn,
  bytes: Uint8Array,
  fds: readonly number[],
  options: SendOptions,
): Promise<void> {
  const data = alloc(bytes.length);
  data.set(bytes);
  let control: Uint8Array<ArrayBuffer> | undefined;
  if (fds.length > 0) {
    control = alloc(cmsgSpace(fds.length));
    const cv = new DataView(control.buffer);
    cv.setBigUint64(0, BigInt(CMSG_HEADER + 4 * fds.length), true);
    cv.setInt32(8, SOL_SOCKET, true);
    cv.setInt32(12, SCM_RIGHTS, true);
    fds.forEach((fd, i) => cv.setInt32(CMSG_HEADER + 4 * i, fd, true));
  }
  const { msg, iov } = msghdr(data, control);
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    let sent: number;
    try {
      sent = check(libc().sendmsg(conn.fd, msg, MSG_NOSIGNAL), "sendmsg");
    } catch (err) {
      if (isErrno(err, "EINTR")) continue;
      if (!isErrno(err, "EAGAIN")) throw err;
      await waitFd(conn.fd, POLLOUT, {
        signal: waitSignal(conn, options.signal),
        timeoutMs: Math.max(0, deadline - performance.now()),
        what: "room in the socket send buffer",
      }).catch(wholeWait(options.timeoutMs));
      continue;
    }
    keepAlive(data, control, iov); // referenced only by address inside msg
    if (sent !== bytes.length) {
      throw new FdPassingError(
        "short-write",
        `Sent ${sent} of ${bytes.length} bytes in one sendmsg`,
      );
    }
    return;
  }
}

/** Send `bytes` and exactly one fd: {@link sendWithFds} with `[fd]`. */
export function sendWithFd(
  conn: UnixConn,
  bytes: Uint8Array,
  fd: number,
  options: SendOptions,
): Promise<void> {
  return sendWithFds(conn, bytes, [fd], options);
}

/** Options of {@link receiveWithFds}. */
export interface ReceiveOptions extends WaitOptions {
  /** Largest accepted payload; a bigger one is refused, not truncated. */
  readonly maxBytes: number;
  /** Room for fds in the control buffer; more fds end as `control-truncated`. @default 8 */
  readonly maxFds?: number;
  /** When set, a message with a different number of fds is refused (`fd-count`). */
  readonly exactFds?: number;
}

/** A received message: the whole payload up to EOF and the fds, all `FD_CLOEXEC`. */
export interface ReceivedMessage {
  /** The payload. */
  readonly bytes: Uint8Array;
  /** The received fds, now owned by the caller. */
  readonly fds: readonly number[];
}

/**
 * Read from `conn` until EOF with `MSG_CMSG_CLOEXEC`, collecting the payload and every
 * `SCM_RIGHTS` fd. On any error (timeout, abort, truncated control data, oversize payload,
 * wrong fd count) every fd received so far is closed before throwing.
 * @throws {FdPassingError} @throws {TimeoutError} @throws `signal.reason` @throws {SysError}
 */
export async function receiveWithFds(
  conn: UnixConn,
  options: ReceiveOptions,
): Promise<ReceivedMessage> {
  const maxFds = options.maxFds ?? DEFAULT_MAX_FDS;
  const data = alloc(Math.max(1, Math.min(RECV_CHUNK, options.maxBytes + 1)));
  const control = alloc(cmsgSpace(maxFds));
  const { msg, mv, iov } = msghdr(data, control);
  const deadline = performance.now() + options.timeoutMs;
  const chunks: Uint8Array[] = [];
  const fds: number[] = [];
  let total = 0;
  try {
    for (;;) {
      mv.setBigUint64(40, BigInt(control.length), true);
      mv.setInt32(48, 0, true);
      let n: number;
      try {
        n = check(libc().recvmsg(conn.fd, msg, MSG_CMSG_CLOEXEC), "recvmsg");
      } catch (err) {
        if (isErrno(err, "EINTR")) continue;
        if (!isErrno(err, "EAGAIN")) throw err;
        await waitFd(conn.fd, POLLIN, {
          signal: waitSignal(conn, options.signal),
          timeoutMs: Math.max(0, deadline - performance.now()),
          what: "the rest of the message",
        }).catch(wholeWait(options.timeoutMs));
        continue;
      }
      keepAlive(iov);
      fds.push(...parseRights(control, Number(mv.getBigUint64(40, true))));
      if (mv.getInt32(48, true) & MSG_CTRUNC) {
        throw new FdPassingError(
          "control-truncated",
          `Control data was truncated (more than ${maxFds} fds sent); the lost fds are closed`,
        );
      }
      if (fds.length > maxFds) {
        // CMSG_SPACE padding can leave room for one more fd than asked for.
        throw new FdPassingError("fd-count", `Received more than ${maxFds} fds`);
      }
      if (n === 0) break;
      total += n;
      if (total > options.maxBytes) {
        throw new FdPassingError("too-large", `Message is larger than ${options.maxBytes} bytes`);
      }
      chunks.push(data.slice(0, n));
    }
    if (options.exactFds !== undefined && fds.length !== options.exactFds) {
      throw new FdPassingError(
        "fd-count",
        `Expected ${options.exactFds} fd(s), received ${fds.length}`,
      );
    }
    const bytes = new Uint8Array(total);
    let offset = 0;
    for (const c of chunks) {
      bytes.set(c, offset);
      offset += c.length;
    }
    return { bytes, fds };
  } catch (err) {
    for (const fd of fds) libc().close(fd);
    throw err;
  }
}

/** The fds of every `SCM_RIGHTS` control message in the first `length` bytes of `control`. */
function parseRights(control: Uint8Array<ArrayBuffer>, length: number): number[] {
  const view = new DataView(control.buffer);
  const fds: number[] = [];
  let offset = 0;
  while (offset + CMSG_HEADER <= length) {
    const len = Number(view.getBigUint64(offset, true));
    if (len < CMSG_HEADER || offset + len > length) break;
    if (
      view.getInt32(offset + 8, true) === SOL_SOCKET &&
      view.getInt32(offset + 12, true) === SCM_RIGHTS
    ) {
      for (let p = offset + CMSG_HEADER; p + 4 <= offset + len; p += 4) {
        fds.push(view.getInt32(p, true));
      }
    }
    offset += align8(len);
  }
  return fds;
}

/**
 * Buffers referenced only by address (inside a msghdr) must stay reachable until the call
 * returns, or an optimising compiler may let the GC free them; passing them here after the call
 * keeps them alive.
 */
function keepAlive(..._buffers: unknown[]): void {}

/** Turn the timeout of one wait slice into the timeout of the whole operation. */
function wholeWait(timeoutMs: number): (err: unknown) => never {
  return (err) => {
    throw err instanceof TimeoutError ? new TimeoutError(err.what, timeoutMs) : err;
  };
}
