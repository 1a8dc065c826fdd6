/**
 * Nonblocking unix stream sockets on libc, for the one place where Deno's own unix sockets do not
 * reach: passing fds with `SCM_RIGHTS` (see `fd_passing.ts`). Every socket is
 * `SOCK_NONBLOCK|SOCK_CLOEXEC`; `accept4` and `connect` are issued synchronously (they never
 * block) and waiting happens in {@link waitFd}, bounded by a timeout and an `AbortSignal`.
 *
 * @module
 */
import { TimeoutError } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { isErrno } from "./errno.ts";
import {
  AF_UNIX,
  alloc,
  check,
  cstr,
  libc,
  O_CLOEXEC,
  O_DIRECTORY,
  O_PATH,
  POLLIN,
  SO_PEERCRED,
  SOCK_CLOEXEC,
  SOCK_NONBLOCK,
  SOCK_STREAM,
  SOL_SOCKET,
} from "./libc.ts";
import { waitFd, type WaitOptions } from "./wait_fd.ts";
import { sleep } from "../util/sleep.ts";

/** Longest socket path: `sun_path` is 108 bytes including the terminating NUL. */
export const MAX_UNIX_PATH_BYTES = 107;
/** Default `listen` backlog: the mounter expects one connection at a time. */
export const DEFAULT_BACKLOG = 8;
/** Default pause between connection attempts while the listener is not there yet (upstream: 5). */
export const DEFAULT_CONNECT_RETRY_MS = 5;

const log = logger("sys", "unix_socket");

/** A socket path that cannot be used (too long, or an existing non-socket file). */
export class UnixSocketPathError extends Error {
  override name = "UnixSocketPathError";
}

/** `struct sockaddr_un` for `path`, and its length (`2 + strlen + 1`). */
export function sockaddrUn(path: string): { addr: Uint8Array<ArrayBuffer>; length: number } {
  const bytes = new TextEncoder().encode(path);
  if (bytes.length === 0 || bytes.length > MAX_UNIX_PATH_BYTES || bytes.includes(0)) {
    throw new UnixSocketPathError(
      `Unix socket path "${path}" must be 1 to ${MAX_UNIX_PATH_BYTES} bytes without NUL, got ${bytes.length}`,
    );
  }
  const addr = alloc(110);
  new DataView(addr.buffer).setUint16(0, AF_UNIX, true);
  addr.set(bytes, 2);
  return { addr, length: 2 + bytes.length + 1 };
}

/** Use of a socket after {@link UnixConn.close} / {@link UnixListener.close}. */
export class SocketClosedError extends Error {
  override name = "SocketClosedError";
}

/**
 * An open socket fd; closing twice is harmless. Closing it also ends every pending wait on it
 * (accept, send, receive) with a {@link SocketClosedError}.
 */
export class UnixSocket implements Disposable {
  #fd: number;
  #closing = new AbortController();
  /** Wrap an open socket fd, which this object now owns. */
  constructor(fd: number) {
    this.#fd = fd;
  }
  /** The fd. @throws {SocketClosedError} after {@link close} */
  get fd(): number {
    if (this.#fd < 0) throw new SocketClosedError("Socket is closed");
    return this.#fd;
  }
  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#fd < 0;
  }
  /** Aborted when the socket is closed; merged into every wait on it. */
  get closedSignal(): AbortSignal {
    return this.#closing.signal;
  }
  /** Close the fd (once), waking pending waits first. */
  close(): void {
    if (this.#fd < 0) return;
    this.#closing.abort(new SocketClosedError("Socket was closed while waiting"));
    libc().close(this.#fd);
    this.#fd = -1;
  }
  /** Same as {@link close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}

/** `signal` combined with the socket's close signal. */
export function waitSignal(
  sock: { readonly closedSignal: AbortSignal },
  signal?: AbortSignal,
): AbortSignal {
  return signal === undefined ? sock.closedSignal : AbortSignal.any([signal, sock.closedSignal]);
}

/**
 * Throw unless `path` can be used as a socket address, directly or through its directory (see
 * {@link withSocketAddress}). Makes no system call.
 * @throws {UnixSocketPathError}
 */
export function checkSocketPath(path: string): void {
  if (new TextEncoder().encode(path).length <= MAX_UNIX_PATH_BYTES) {
    sockaddrUn(path);
  } else {
    sockaddrUn(`/proc/self/fd/${2 ** 31 - 1}/${path.slice(path.lastIndexOf("/") + 1)}`);
  }
}

/**
 * Run `fn` with a `sockaddr_un` for `path`. A path longer than `sun_path` allows is reached
 * through its directory instead: the directory is opened with `O_PATH` and the address becomes
 * `/proc/self/fd/<dirfd>/<name>` (upstream makes the path relative for the same reason).
 * @throws {UnixSocketPathError} when even the file name alone is too long
 */
export function withSocketAddress<T>(
  path: string,
  fn: (addr: Uint8Array<ArrayBuffer>, length: number) => T,
): T {
  if (new TextEncoder().encode(path).length <= MAX_UNIX_PATH_BYTES) {
    const { addr, length } = sockaddrUn(path);
    return fn(addr, length);
  }
  const slash = path.lastIndexOf("/");
  const dir = slash <= 0 ? "/" : path.slice(0, slash);
  const name = path.slice(slash + 1);
  checkSocketPath(path);
  const dirfd = check(libc().open(cstr(dir), O_PATH | O_DIRECTORY | O_CLOEXEC, 0), "open", dir);
  try {
    const { addr, length } = sockaddrUn(`/proc/self/fd/${dirfd}/${name}`);
    return fn(addr, length);
  } finally {
    libc().close(dirfd);
  }
}

/** A listening socket. Closing it does not remove the socket file. */
export class UnixListener extends UnixSocket {
  /** Wrap listening `fd` bound to `path`. */
  constructor(fd: number, readonly path: string) {
    super(fd);
  }
}

/** A connected socket (either end). */
export class UnixConn extends UnixSocket {}

/** Options of {@link listenUnix}. */
export interface ListenOptions {
  /** Permission bits of the socket file (set before `listen`, so no one connects earlier). */
  readonly mode?: number;
  /** Pending connections the kernel queues. @default {@link DEFAULT_BACKLOG} */
  readonly backlog?: number;
}

/**
 * Create a listening socket at `path`. A stale socket file left by a previous run is removed; any
 * other existing file is an error.
 * @throws {UnixSocketPathError} @throws {SysError}
 */
export async function listenUnix(path: string, options: ListenOptions = {}): Promise<UnixListener> {
  checkSocketPath(path); // before touching anything
  try {
    const info = await Deno.lstat(path);
    if (!info.isSocket) throw new UnixSocketPathError(`"${path}" exists and is not a socket`);
    await Deno.remove(path);
    log.debug("Removed stale socket {path}", { path });
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const sock = new UnixListener(
    check(libc().socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket"),
    path,
  );
  try {
    withSocketAddress(
      path,
      (addr, length) => check(libc().bind(sock.fd, addr, length), "bind", path),
    );
    if (options.mode !== undefined) await Deno.chmod(path, options.mode);
    check(libc().listen(sock.fd, options.backlog ?? DEFAULT_BACKLOG), "listen", path);
    return sock;
  } catch (err) {
    sock.close();
    throw err;
  }
}

/** Credentials of the peer process, as the kernel recorded them at `connect` time. */
export interface PeerCredentials {
  /** Process id (in the receiver's pid namespace; 0 when not visible there). */
  readonly pid: number;
  /** Effective user id. */
  readonly uid: number;
  /** Effective group id. */
  readonly gid: number;
}

/** `SO_PEERCRED` of a connected socket. @throws {SysError} */
export function peerCredentials(conn: UnixConn): PeerCredentials {
  const cred = alloc(12);
  const len = alloc(4);
  new DataView(len.buffer).setUint32(0, 12, true);
  check(libc().getsockopt(conn.fd, SOL_SOCKET, SO_PEERCRED, cred, len), "getsockopt");
  const view = new DataView(cred.buffer);
  return {
    pid: view.getInt32(0, true),
    uid: view.getUint32(4, true),
    gid: view.getUint32(8, true),
  };
}

/** Options of {@link accept}. */
export interface AcceptOptions extends WaitOptions {
  /** When set, connections from other uids are closed (and logged) and waiting goes on. */
  readonly allowUids?: readonly number[];
}

/**
 * Wait for the next connection on `listener`.
 * @throws {TimeoutError} @throws `signal.reason` @throws {SysError}
 */
export async function accept(listener: UnixListener, options: AcceptOptions): Promise<UnixConn> {
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    options.signal?.throwIfAborted();
    if (performance.now() > deadline) {
      throw new TimeoutError(`a connection on "${listener.path}"`, options.timeoutMs);
    }
    let fd: number;
    try {
      fd = check(libc().accept4(listener.fd, null, null, SOCK_NONBLOCK | SOCK_CLOEXEC), "accept4");
    } catch (err) {
      if (isErrno(err, "EINTR", "ECONNABORTED")) continue;
      if (!isErrno(err, "EAGAIN")) throw err;
      await waitFd(listener.fd, POLLIN, {
        signal: waitSignal(listener, options.signal),
        timeoutMs: Math.max(0, deadline - performance.now()),
        what: `a connection on "${listener.path}"`,
      }).catch((e) => {
        // Report the whole wait, not the last slice.
        throw e instanceof TimeoutError ? new TimeoutError(e.what, options.timeoutMs) : e;
      });
      continue;
    }
    const conn = new UnixConn(fd);
    if (options.allowUids === undefined) return conn;
    const peer = peerCredentials(conn);
    if (options.allowUids.includes(peer.uid)) return conn;
    conn.close();
    log.warn("Refused a connection on {path} from uid {uid} (pid {pid})", {
      path: listener.path,
      ...peer,
    });
  }
}

/** Options of {@link connectUnix}. */
export interface ConnectOptions extends WaitOptions {
  /** Pause between attempts while the socket is missing or refuses. @default 5 */
  readonly retryIntervalMs?: number;
}

/**
 * Connect to the listener at `path`, retrying every few milliseconds on `ENOENT` (not created
 * yet), `ECONNREFUSED` (nobody listening) and `EAGAIN` (backlog full) until the timeout.
 * @throws {TimeoutError} (with the last error as `cause`) @throws `signal.reason` @throws {SysError}
 */
export async function connectUnix(path: string, options: ConnectOptions): Promise<UnixConn> {
  checkSocketPath(path); // a path error is not worth retrying
  const { signal, timeoutMs } = options;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    const conn = new UnixConn(
      check(libc().socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket"),
    );
    let last: unknown;
    try {
      withSocketAddress(
        path,
        (addr, length) => check(libc().connect(conn.fd, addr, length), "connect", path),
      );
      return conn;
    } catch (err) {
      conn.close();
      if (!isErrno(err, "ENOENT", "ECONNREFUSED", "EAGAIN", "EINTR")) throw err;
      last = err;
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) {
      throw new TimeoutError(`a listener on "${path}"`, timeoutMs, { cause: last });
    }
    await sleep(Math.min(options.retryIntervalMs ?? DEFAULT_CONNECT_RETRY_MS, remaining), signal);
  }
}
