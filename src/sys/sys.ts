/**
 * {@link Sys}: the operating-system operations the node plugin and the mounter need, behind one
 * small interface so that `node/` and `mounter/` can be unit-tested with `fake_sys.ts` and wired
 * to {@link RealSys} in `cmd/`.
 *
 * Path operations are async in the interface even where today's implementation is a synchronous
 * FFI call, so an implementation may move them off the JS thread without changing callers.
 *
 * @module
 */
import {
  abortFuseConnection,
  type AbortFuseResult,
  bindMount,
  type BindMountOptions,
  clearCloexec,
  closeFd,
  fdTarget,
  isFuseDevice,
  mountFuse,
  type MountFuseOptions,
  openFuse,
  setReadAheadKb,
  unmount,
  type UnmountOptions,
  type UnmountResult,
} from "./mount.ts";
import { execReplace } from "./exec.ts";
import { type MountInfo, readMountInfo } from "./mountinfo.ts";
import { waitMountReady, type WaitMountReadyOptions } from "./mount_ready.ts";
import {
  type ReceivedMessage,
  type ReceiveOptions,
  receiveWithFds,
  type SendOptions,
  sendWithFd,
} from "./fd_passing.ts";
import {
  accept,
  type AcceptOptions,
  type ConnectOptions,
  connectUnix,
  type ListenOptions,
  listenUnix,
  type PeerCredentials,
  peerCredentials,
  UnixConn,
  UnixListener,
} from "./unix_socket.ts";

export type {
  AbortFuseResult,
  AcceptOptions,
  BindMountOptions,
  ConnectOptions,
  ListenOptions,
  MountFuseOptions,
  MountInfo,
  PeerCredentials,
  ReceivedMessage,
  ReceiveOptions,
  SendOptions,
  UnmountOptions,
  UnmountResult,
  WaitMountReadyOptions,
};

/** A listening socket handed out by a {@link Sys}. */
export interface SysListener extends Disposable {
  /** The socket path. */
  readonly path: string;
  /** Stop listening (the socket file stays). Idempotent. */
  close(): void;
}

/** A connected socket handed out by a {@link Sys}. */
export interface SysConn extends Disposable {
  /** Close the connection. Idempotent. */
  close(): void;
}

/** The operating-system operations of the node plugin and the mounter. */
export interface Sys {
  /** Open `/dev/fuse` (`O_RDWR|O_CLOEXEC`); returns the fd. */
  openFuse(): number;
  /** Mount a FUSE file system served through `options.fd` on `target`. */
  mountFuse(target: string, options: MountFuseOptions): Promise<void>;
  /** Bind-mount `source` on `target`, optionally read-only (keeping nosuid,nodev). */
  bindMount(source: string, target: string, options?: BindMountOptions): Promise<void>;
  /** Unmount `path`; `"not-mounted"` when nothing is mounted there. */
  unmount(path: string, options?: UnmountOptions): Promise<UnmountResult>;
  /** The current mount table. */
  readMountInfo(): Promise<MountInfo[]>;
  /** Wait until the FUSE mount at `path` answers; aborts the connection on failure. */
  waitMountReady(path: string, options: WaitMountReadyOptions): Promise<void>;
  /** Abort FUSE connection `minor`. */
  abortFuseConnection(minor: number): Promise<AbortFuseResult>;
  /** Set the readahead of the mount with `st_dev` `majorMinor`, in KiB. */
  setReadAheadKb(majorMinor: string, kb: number): Promise<void>;
  /** Close an fd. */
  closeFd(fd: number): void;
  /** What an fd refers to (`/proc/self/fd/<fd>`), e.g. `"/dev/fuse"`; for messages. */
  fdTarget(fd: number): string;
  /** True when an fd is open on the FUSE device (char 10:229, whatever its path shows). */
  isFuseDevice(fd: number): boolean;
  /** Clear `FD_CLOEXEC` so a spawned engine inherits the fd. */
  clearCloexec(fd: number): void;
  /** Replace this process with `path` (`execve`); returns only by throwing why it failed. */
  execReplace(path: string, argv: readonly string[], env: Readonly<Record<string, string>>): never;
  /** Listen on a unix socket at `path`, replacing a stale socket file. */
  listenUnix(path: string, options?: ListenOptions): Promise<SysListener>;
  /** Wait for the next connection. */
  accept(listener: SysListener, options: AcceptOptions): Promise<SysConn>;
  /** Connect to `path`, retrying while it is missing or refuses. */
  connectUnix(path: string, options: ConnectOptions): Promise<SysConn>;
  /** The peer's pid, uid and gid. */
  peerCredentials(conn: SysConn): PeerCredentials;
  /** Send `bytes` and one fd in a single message. */
  sendWithFd(conn: SysConn, bytes: Uint8Array, fd: number, options: SendOptions): Promise<void>;
  /** Read a whole message (to EOF) and its fds. */
  receiveWithFds(conn: SysConn, options: ReceiveOptions): Promise<ReceivedMessage>;
}

function realListener(listener: SysListener): UnixListener {
  if (!(listener instanceof UnixListener)) {
    throw new TypeError("Listener does not come from RealSys");
  }
  return listener;
}

function realConn(conn: SysConn): UnixConn {
  if (!(conn instanceof UnixConn)) throw new TypeError("Connection does not come from RealSys");
  return conn;
}

/** {@link Sys} on the real kernel, through `libc.ts`. Needs root (CAP_SYS_ADMIN) and `-A`. */
export class RealSys implements Sys {
  /** {@inheritDoc Sys.openFuse} */
  openFuse(): number {
    return openFuse();
  }
  /** {@inheritDoc Sys.mountFuse} */
  mountFuse(target: string, options: MountFuseOptions): Promise<void> {
    return Promise.resolve().then(() => mountFuse(target, options));
  }
  /** {@inheritDoc Sys.bindMount} */
  bindMount(source: string, target: string, options: BindMountOptions = {}): Promise<void> {
    return Promise.resolve().then(() => bindMount(source, target, options));
  }
  /** {@inheritDoc Sys.unmount} */
  unmount(path: string, options: UnmountOptions = {}): Promise<UnmountResult> {
    return Promise.resolve().then(() => unmount(path, options));
  }
  /** {@inheritDoc Sys.readMountInfo} */
  readMountInfo(): Promise<MountInfo[]> {
    return readMountInfo();
  }
  /** {@inheritDoc Sys.waitMountReady} */
  waitMountReady(path: string, options: WaitMountReadyOptions): Promise<void> {
    return waitMountReady(path, options);
  }
  /** {@inheritDoc Sys.abortFuseConnection} */
  abortFuseConnection(minor: number): Promise<AbortFuseResult> {
    return abortFuseConnection(minor);
  }
  /** {@inheritDoc Sys.setReadAheadKb} */
  setReadAheadKb(majorMinor: string, kb: number): Promise<void> {
    return Promise.resolve().then(() => setReadAheadKb(majorMinor, kb));
  }
  /** {@inheritDoc Sys.closeFd} */
  closeFd(fd: number): void {
    closeFd(fd);
  }
  /** {@inheritDoc Sys.fdTarget} */
  fdTarget(fd: number): string {
    return fdTarget(fd);
  }
  /** {@inheritDoc Sys.isFuseDevice} */
  isFuseDevice(fd: number): boolean {
    return isFuseDevice(fd);
  }
  /** {@inheritDoc Sys.clearCloexec} */
  clearCloexec(fd: number): void {
    clearCloexec(fd);
  }
  /** {@inheritDoc Sys.execReplace} */
  execReplace(path: string, argv: readonly string[], env: Readonly<Record<string, string>>): never {
    return execReplace(path, argv, env);
  }
  /** {@inheritDoc Sys.listenUnix} */
  listenUnix(path: string, options: ListenOptions = {}): Promise<SysListener> {
    return listenUnix(path, options);
  }
  /** {@inheritDoc Sys.accept} */
  accept(listener: SysListener, options: AcceptOptions): Promise<SysConn> {
    return Promise.resolve().then(() => accept(realListener(listener), options));
  }
  /** {@inheritDoc Sys.connectUnix} */
  connectUnix(path: string, options: ConnectOptions): Promise<SysConn> {
    return connectUnix(path, options);
  }
  /** {@inheritDoc Sys.peerCredentials} */
  peerCredentials(conn: SysConn): PeerCredentials {
    return peerCredentials(realConn(conn));
  }
  /** {@inheritDoc Sys.sendWithFd} */
  sendWithFd(conn: SysConn, bytes: Uint8Array, fd: number, options: SendOptions): Promise<void> {
    return Promise.resolve().then(() => sendWithFd(realConn(conn), bytes, fd, options));
  }
  /** {@inheritDoc Sys.receiveWithFds} */
  receiveWithFds(conn: SysConn, options: ReceiveOptions): Promise<ReceivedMessage> {
    return Promise.resolve().then(() => receiveWithFds(realConn(conn), options));
  }
}
