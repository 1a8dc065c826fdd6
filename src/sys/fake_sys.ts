/**
 * {@link FakeSys}: an in-memory {@link Sys} for unit tests of `node/` and `mounter/`. It records
 * every call, keeps a mount table that `mountFuse`/`bindMount`/`unmount` update (so
 * `readMountInfo` and the `mountinfo.ts` lookups see the effect), hands out fake fds, and connects
 * in-memory unix sockets within the same process. Failures are injected with
 * {@link FakeSys.failNext}. It needs no permission and touches nothing outside itself.
 *
 * @module
 */
import { SysError } from "./errno.ts";
import { FdPassingError } from "./fd_passing.ts";
import { findMount, mountContaining, type MountInfo, normalizeMountPath } from "./mountinfo.ts";
import { DEFAULT_FS_NAME, FUSE_DEVICE, fuseMountData } from "./mount.ts";
import type {
  AbortFuseResult,
  AcceptOptions,
  BindMountOptions,
  ConnectOptions,
  ListenOptions,
  MountFuseOptions,
  PeerCredentials,
  ReceivedMessage,
  ReceiveOptions,
  SendOptions,
  Sys,
  SysConn,
  SysListener,
  UnmountOptions,
  UnmountResult,
  WaitMountReadyOptions,
} from "./sys.ts";
import { waitFor } from "../util/wait_for.ts";

/** One recorded call: the method name and its arguments. */
export interface FakeCall {
  /** Method name, e.g. `"bindMount"`. */
  readonly op: keyof Sys;
  /** The arguments as passed. */
  readonly args: readonly unknown[];
}

/** What {@link FakeSys.execReplace} throws instead of replacing the process. */
export class ExecCalled extends Error {
  override name = "ExecCalled";
  /** Record an exec of `path`. */
  constructor(
    readonly path: string,
    readonly argv: readonly string[],
    readonly env: Readonly<Record<string, string>>,
    /** Open fds without `FD_CLOEXEC`, which the new program would get. */
    readonly inheritedFds: readonly number[],
  ) {
    super(`exec ${path} ${argv.slice(1).join(" ")}`);
  }
}

const ROOT_MOUNT: MountInfo = {
  mountId: 1,
  parentId: 1,
  majorMinor: "254:0",
  major: 254,
  minor: 0,
  root: "/",
  mountPoint: "/",
  mountOptions: ["rw", "relatime"],
  optionalFields: [],
  fsType: "ext4",
  source: "/dev/vda",
  superOptions: ["rw"],
};

const POLL_MS = 1;

/** {@link waitFor} options polling every {@link POLL_MS} within a call's deadline and signal. */
function poll(options: { readonly signal?: AbortSignal | undefined; readonly timeoutMs: number }) {
  return { timeoutMs: options.timeoutMs, intervalMs: POLL_MS, signal: options.signal };
}

class FakeListener implements SysListener {
  readonly pending: FakeConn[] = [];
  closed = false;
  constructor(readonly path: string) {}
  close(): void {
    this.closed = true;
  }
  [Symbol.dispose](): void {
    this.close();
  }
}

class FakeConn implements SysConn {
  peer!: FakeConn;
  /** Messages received from the peer: payload and (already duplicated) fds. */
  readonly inbox: { bytes: Uint8Array; fds: number[] }[] = [];
  closed = false;
  constructor(readonly credentials: PeerCredentials) {}
  close(): void {
    this.closed = true;
  }
  [Symbol.dispose](): void {
    this.close();
  }
}

/** An in-memory {@link Sys} that records calls. */
export class FakeSys implements Sys {
  /** Every call, in order. */
  readonly calls: FakeCall[] = [];
  /** The mount table; starts with a root mount. */
  mounts: MountInfo[] = [ROOT_MOUNT];
  /** Open fake fds and what they point at. */
  readonly fds: Map<number, string> = new Map();
  readonly #fuseFds = new Set<number>();
  readonly #cloexecCleared = new Set<number>();
  /** Readahead values set, by `majorMinor`. */
  readonly readAheadKb: Map<string, number> = new Map();
  /** FUSE connections aborted, by minor. */
  readonly abortedConnections: number[] = [];
  /** Credentials that the next connections made by {@link connectUnix} carry. */
  connectCredentials: PeerCredentials = { pid: 4242, uid: 0, gid: 0 };
  #failures = new Map<keyof Sys, unknown[]>();
  #listeners = new Map<string, FakeListener>();
  #nextFd = 100;
  #nextMountId = 100;
  #nextMinor = 100;

  /** Make the next call of `op` throw `error` (queued: call again for later calls). */
  failNext(op: keyof Sys, error: unknown): void {
    const list = this.#failures.get(op) ?? [];
    list.push(error);
    this.#failures.set(op, list);
  }

  /** Calls of one method, e.g. `sys.callsOf("unmount")`. */
  callsOf(op: keyof Sys): FakeCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  /**
   * Add an fd pointing at `target` (for example a received non-FUSE fd). It is open on the FUSE
   * device when `target` is `/dev/fuse` or `options.fuseDevice` says so (the device seen under
   * another path, as from a container or chroot).
   */
  addFd(target: string, options: { fuseDevice?: boolean } = {}): number {
    const fd = this.#nextFd++;
    this.fds.set(fd, target);
    if (options.fuseDevice ?? target === FUSE_DEVICE) this.#fuseFds.add(fd);
    return fd;
  }

  #record(op: keyof Sys, ...args: unknown[]): void {
    this.calls.push({ op, args });
    const failure = this.#failures.get(op)?.shift();
    if (failure !== undefined) throw failure;
  }

  #fd(fd: number, syscall: string): string {
    const target = this.fds.get(fd);
    if (target === undefined) throw new SysError(9, syscall);
    return target;
  }

  #addMount(entry: Omit<MountInfo, "mountId" | "parentId">): void {
    const parent = mountContaining(this.mounts, entry.mountPoint) ?? ROOT_MOUNT;
    this.mounts = [...this.mounts, {
      mountId: this.#nextMountId++,
      parentId: parent.mountId,
      ...entry,
    }];
  }

  /** {@inheritDoc Sys.openFuse} */
  openFuse(): number {
    this.#record("openFuse");
    return this.addFd("/dev/fuse");
  }

  /** {@inheritDoc Sys.mountFuse} */
  mountFuse(target: string, options: MountFuseOptions): Promise<void> {
    return Promise.resolve().then(() => {
      this.#record("mountFuse", target, options);
      this.#fd(options.fd, "mount");
      if (!this.#fuseFds.has(options.fd)) {
        throw new SysError(22, "mount", { path: target });
      }
      const minor = this.#nextMinor++;
      this.#addMount({
        majorMinor: `0:${minor}`,
        major: 0,
        minor,
        root: "/",
        mountPoint: normalizeMountPath(target),
        mountOptions: [options.readOnly ? "ro" : "rw", "nosuid", "nodev", "noatime"],
        optionalFields: [],
        fsType: options.fsType ?? "fuse",
        source: options.fsName ?? DEFAULT_FS_NAME,
        superOptions: [
          "rw",
          ...fuseMountData(options).split(",").filter((o) => !/^(fd|rootmode)=/.test(o)),
        ],
      });
    });
  }

  /** {@inheritDoc Sys.bindMount} */
  bindMount(source: string, target: string, options: BindMountOptions = {}): Promise<void> {
    return Promise.resolve().then(() => {
      this.#record("bindMount", source, target, options);
      const from = mountContaining(this.mounts, source)!;
      const src = normalizeMountPath(source);
      const sub = from.mountPoint === "/" ? src : src.slice(from.mountPoint.length);
      const root = normalizeMountPath(`${from.root}/${sub}`);
      const flags = from.mountOptions.filter((o) => o !== "rw" && o !== "ro");
      this.#addMount({
        ...from,
        root,
        mountPoint: normalizeMountPath(target),
        mountOptions: [options.readOnly ? "ro" : "rw", ...flags],
        optionalFields: [],
      });
    });
  }

  /** {@inheritDoc Sys.unmount} */
  unmount(path: string, options: UnmountOptions = {}): Promise<UnmountResult> {
    return Promise.resolve().then(() => {
      this.#record("unmount", path, options);
      const m = findMount(this.mounts, path);
      if (m === undefined || m.mountPoint === "/") return "not-mounted";
      this.mounts = this.mounts.filter((x) => x !== m);
      return "unmounted";
    });
  }

  /** {@inheritDoc Sys.readMountInfo} */
  readMountInfo(): Promise<MountInfo[]> {
    return Promise.resolve().then(() => {
      this.#record("readMountInfo");
      return [...this.mounts];
    });
  }

  /** {@inheritDoc Sys.waitMountReady} Ready at once unless a failure was injected. */
  waitMountReady(path: string, options: WaitMountReadyOptions): Promise<void> {
    return Promise.resolve().then(() => {
      this.#record("waitMountReady", path, options);
      options.signal?.throwIfAborted();
      if (findMount(this.mounts, path) === undefined) throw new SysError(107, "stat", { path });
    });
  }

  /** {@inheritDoc Sys.abortFuseConnection} */
  abortFuseConnection(minor: number): Promise<AbortFuseResult> {
    return Promise.resolve().then(() => {
      this.#record("abortFuseConnection", minor);
      if (!this.mounts.some((m) => m.minor === minor && m.fsType.startsWith("fuse"))) {
        return "no-connection";
      }
      this.abortedConnections.push(minor);
      return "aborted";
    });
  }

  /** {@inheritDoc Sys.setReadAheadKb} */
  setReadAheadKb(majorMinor: string, kb: number): Promise<void> {
    return Promise.resolve().then(() => {
      this.#record("setReadAheadKb", majorMinor, kb);
      this.readAheadKb.set(majorMinor, kb);
    });
  }

  /** {@inheritDoc Sys.closeFd} */
  closeFd(fd: number): void {
    this.#record("closeFd", fd);
    this.#fd(fd, "close");
    this.fds.delete(fd);
    this.#fuseFds.delete(fd);
    this.#cloexecCleared.delete(fd);
  }

  /** {@inheritDoc Sys.fdTarget} */
  fdTarget(fd: number): string {
    this.#record("fdTarget", fd);
    return this.#fd(fd, "readlink");
  }

  /** {@inheritDoc Sys.isFuseDevice} See {@link addFd}. */
  isFuseDevice(fd: number): boolean {
    this.#record("isFuseDevice", fd);
    this.#fd(fd, "fstat");
    return this.#fuseFds.has(fd);
  }

  /** {@inheritDoc Sys.clearCloexec} */
  clearCloexec(fd: number): void {
    this.#record("clearCloexec", fd);
    this.#fd(fd, "fcntl");
    this.#cloexecCleared.add(fd);
  }

  /**
   * {@inheritDoc Sys.execReplace} The fake cannot replace the process: it records the call and
   * throws {@link ExecCalled} (a test catches it to see what would have run), or the injected
   * failure.
   */
  execReplace(path: string, argv: readonly string[], env: Readonly<Record<string, string>>): never {
    this.#record("execReplace", path, argv, env);
    const inherited = [...this.fds.keys()].filter((fd) => this.#cloexecCleared.has(fd));
    throw new ExecCalled(path, argv, env, inherited);
  }

  /** {@inheritDoc Sys.listenUnix} */
  listenUnix(path: string, options: ListenOptions = {}): Promise<SysListener> {
    return Promise.resolve().then(() => {
      this.#record("listenUnix", path, options);
      const listener = new FakeListener(path);
      this.#listeners.set(path, listener);
      return listener;
    });
  }

  /** {@inheritDoc Sys.accept} */
  async accept(listener: SysListener, options: AcceptOptions): Promise<SysConn> {
    this.#record("accept", listener, options);
    const l = listener as FakeListener;
    for (;;) {
      await waitFor(`a connection on "${l.path}"`, () => l.pending.length > 0, poll(options));
      const conn = l.pending.shift()!;
      if (
        options.allowUids === undefined || options.allowUids.includes(conn.peer.credentials.uid)
      ) {
        return conn;
      }
      conn.close();
    }
  }

  /** {@inheritDoc Sys.connectUnix} */
  async connectUnix(path: string, options: ConnectOptions): Promise<SysConn> {
    this.#record("connectUnix", path, options);
    await waitFor(
      `a listener on "${path}"`,
      () => this.#listeners.get(path)?.closed === false,
      poll(options),
    );
    const client = new FakeConn(this.connectCredentials);
    const server = new FakeConn({ pid: 1, uid: 0, gid: 0 });
    client.peer = server;
    server.peer = client;
    this.#listeners.get(path)!.pending.push(server);
    return client;
  }

  /** {@inheritDoc Sys.peerCredentials} */
  peerCredentials(conn: SysConn): PeerCredentials {
    this.#record("peerCredentials", conn);
    return (conn as FakeConn).peer.credentials;
  }

  /** {@inheritDoc Sys.sendWithFd} The fd is duplicated to a new fake fd for the receiver. */
  sendWithFd(conn: SysConn, bytes: Uint8Array, fd: number, options: SendOptions): Promise<void> {
    return Promise.resolve().then(() => {
      this.#record("sendWithFd", conn, bytes, fd, options);
      const c = conn as FakeConn;
      if (c.closed || c.peer.closed) throw new SysError(32, "sendmsg");
      c.peer.inbox.push({
        bytes: bytes.slice(),
        fds: [
          this.addFd(this.#fd(fd, "sendmsg"), { fuseDevice: this.#fuseFds.has(fd) }),
        ],
      });
    });
  }

  /** {@inheritDoc Sys.receiveWithFds} Resolves once the peer has closed (EOF). */
  async receiveWithFds(conn: SysConn, options: ReceiveOptions): Promise<ReceivedMessage> {
    this.#record("receiveWithFds", conn, options);
    const c = conn as FakeConn;
    await waitFor("the rest of the message", () => c.peer.closed, poll(options));
    const fds = c.inbox.flatMap((m) => m.fds);
    const total = c.inbox.reduce((n, m) => n + m.bytes.length, 0);
    const fail = (err: Error) => {
      for (const fd of fds) {
        this.fds.delete(fd);
        this.#fuseFds.delete(fd);
      }
      throw err;
    };
    if (total > options.maxBytes) {
      fail(new FdPassingError("too-large", `Message is larger than ${options.maxBytes} bytes`));
    }
    if (options.exactFds !== undefined && fds.length !== options.exactFds) {
      fail(
        new FdPassingError(
          "fd-count",
          `Expected ${options.exactFds} fd(s), received ${fds.length}`,
        ),
      );
    }
    const bytes = new Uint8Array(total);
    let offset = 0;
    for (const m of c.inbox.splice(0)) {
      bytes.set(m.bytes, offset);
      offset += m.bytes.length;
    }
    return { bytes, fds };
  }
}
