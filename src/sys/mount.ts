/**
 * Mount-related system calls: open `/dev/fuse`, mount a FUSE file system on it, bind mounts,
 * unmount, abort a FUSE connection, tune readahead and small fd helpers.
 *
 * All calls are synchronous FFI calls that do not wait on a FUSE server: `mount` of a FUSE fd and
 * bind mounts of a FUSE mount return at once even before the server answers `FUSE_INIT` (only a
 * `stat` of the mount root waits for it, so check readiness with an async stat and a timeout).
 *
 * @module
 */
import { logger } from "../util/log.ts";
import { isErrno, SysError } from "./errno.ts";
import { isFuseDeviceFile } from "./fuse_device.ts";
import {
  alloc,
  check,
  cstr,
  F_GETFD,
  F_SETFD,
  FD_CLOEXEC,
  libc,
  MNT_DETACH,
  MNT_FORCE,
  MS_BIND,
  MS_NOATIME,
  MS_NODEV,
  MS_NOSUID,
  MS_RDONLY,
  MS_REMOUNT,
  O_CLOEXEC,
  O_RDWR,
  O_WRONLY,
} from "./libc.ts";
import { findMount, readMountInfo } from "./mountinfo.ts";

/** The FUSE character device. */
export const FUSE_DEVICE = "/dev/fuse";
/** The `fsname` (mount source) that upstream uses and that mount detection looks for. */
export const DEFAULT_FS_NAME = "mountpoint-s3";
/** Where the kernel's fusectl file system exposes one directory per FUSE connection. */
export const FUSECTL_DIR = "/sys/fs/fuse/connections";

const log = logger("sys", "mount");

/**
 * Open the FUSE device read-write with `O_CLOEXEC`; returns the fd. `path` is `/dev/fuse` but for
 * tests that reach the device through another root. @throws {SysError}
 */
export function openFuse(path = FUSE_DEVICE): number {
  return check(libc().open(cstr(path), O_RDWR | O_CLOEXEC, 0), "open", path);
}

/** Options of {@link mountFuse}. */
export interface MountFuseOptions {
  /** The open `/dev/fuse` fd that the server will read. */
  readonly fd: number;
  /** Mount with `MS_RDONLY`. @default false */
  readonly readOnly?: boolean;
  /** Let users other than the mounting one (root) access the mount. @default false */
  readonly allowOther?: boolean;
  /** Mount source shown in mountinfo. @default {@link DEFAULT_FS_NAME} */
  readonly fsName?: string;
  /** File-system type: `"fuse"` or `"fuse.<subtype>"`. @default "fuse" */
  readonly fsType?: string;
  /** `user_id=` of the mount owner. @default 0 */
  readonly userId?: number;
  /** `group_id=` of the mount owner. @default 0 */
  readonly groupId?: number;
}

/** The `data` string of a FUSE mount, e.g. `fd=9,rootmode=40000,user_id=0,group_id=0,…`. */
export function fuseMountData(options: MountFuseOptions): string {
  const parts = [
    `fd=${options.fd}`,
    "rootmode=40000",
    `user_id=${options.userId ?? 0}`,
    `group_id=${options.groupId ?? 0}`,
    "default_permissions",
  ];
  if (options.allowOther) parts.push("allow_other");
  return parts.join(",");
}

/** The `mount(2)` flags of a FUSE mount: `MS_NODEV|MS_NOSUID|MS_NOATIME[|MS_RDONLY]`. */
export function fuseMountFlags(options: { readonly readOnly?: boolean }): number {
  return MS_NODEV | MS_NOSUID | MS_NOATIME | (options.readOnly ? MS_RDONLY : 0);
}

/**
 * Mount a FUSE file system served through `options.fd` on the directory `target`. The mount
 * appears as source `fsName`, type `fuse`. The fd stays open; the caller hands it to the server
 * and then closes its own copy (otherwise a dead server is not noticed).
 * @throws {SysError} e.g. `ENOENT` (no target), `EPERM` (no CAP_SYS_ADMIN)
 */
export function mountFuse(target: string, options: MountFuseOptions): void {
  const fsName = options.fsName ?? DEFAULT_FS_NAME;
  const fsType = options.fsType ?? "fuse";
  const data = fuseMountData(options);
  const flags = BigInt(fuseMountFlags(options));
  check(libc().mount(cstr(fsName), cstr(target), cstr(fsType), flags, cstr(data)), "mount", target);
  log.debug("Mounted FUSE {target} ({data})", { target, data });
}

/** Options of {@link bindMount}. */
export interface BindMountOptions {
  /** Make the bind mount read-only (a second, remount call). @default false */
  readonly readOnly?: boolean;
}

/**
 * Bind-mount `source` on `target`. A read-only bind takes a second call,
 * `MS_REMOUNT|MS_BIND|MS_RDONLY|MS_NOSUID|MS_NODEV`: the remount replaces the per-mount flags, so
 * `nosuid,nodev` are passed again. If the remount fails the bind is undone before throwing.
 * @throws {SysError}
 */
export function bindMount(source: string, target: string, options: BindMountOptions = {}): void {
  check(libc().mount(cstr(source), cstr(target), null, BigInt(MS_BIND), null), "mount", target);
  if (options.readOnly) {
    const flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
    try {
      check(libc().mount(null, cstr(target), null, BigInt(flags), null), "mount", target);
    } catch (err) {
      libc().umount2(cstr(target), MNT_DETACH);
      throw err;
    }
  }
  log.debug("Bind-mounted {source} on {target}", { source, target, readOnly: !!options.readOnly });
}

/** Options of {@link unmount}. */
export interface UnmountOptions {
  /** `MNT_DETACH`: detach now, clean up when no longer busy. @default false */
  readonly detach?: boolean;
  /** `MNT_FORCE`: abort pending requests (FUSE: like aborting the connection). @default false */
  readonly force?: boolean;
}

/** What {@link unmount} did. */
export type UnmountResult = "unmounted" | "not-mounted";

/**
 * Unmount `path`. Idempotent: when nothing is mounted there (`EINVAL`) or the path does not exist
 * (`ENOENT`) it returns `"not-mounted"` instead of throwing.
 * @throws {SysError} e.g. `EBUSY` (in use; retry or use `detach`)
 */
export function unmount(path: string, options: UnmountOptions = {}): UnmountResult {
  const flags = (options.detach ? MNT_DETACH : 0) | (options.force ? MNT_FORCE : 0);
  try {
    check(libc().umount2(cstr(path), flags), "umount2", path);
  } catch (err) {
    if (isErrno(err, "EINVAL", "ENOENT")) return "not-mounted";
    throw err;
  }
  log.debug("Unmounted {path}", { path, ...options });
  return "unmounted";
}

/** Write `text` to an existing file (sysfs/fusectl attributes) with one `write`. @throws {SysError} */
export function writeAttribute(path: string, text: string): void {
  const fd = check(libc().open(cstr(path), O_WRONLY | O_CLOEXEC, 0), "open", path);
  try {
    const bytes = new TextEncoder().encode(text);
    const n = check(libc().write(fd, bytes, BigInt(bytes.length)), "write", path);
    if (n !== bytes.length) throw new SysError(5, "write", { path });
  } finally {
    libc().close(fd);
  }
}

/** What {@link abortFuseConnection} did. */
export type AbortFuseResult = "aborted" | "no-connection";

/**
 * Abort FUSE connection `minor` (the minor device number of the mount, see
 * {@link MountInfo.minor}): every pending and future request fails with `ENOTCONN`. This is the
 * only way out when a server took a request and hung. Mounts fusectl at {@link FUSECTL_DIR} when
 * it is absent, and unmounts it again afterwards. Returns `"no-connection"` when the connection
 * does not exist (already gone).
 * @throws {SysError}
 */
export async function abortFuseConnection(minor: number): Promise<AbortFuseResult> {
  const mounted = findMount(await readMountInfo(), FUSECTL_DIR) !== undefined;
  if (!mounted) {
    check(
      libc().mount(cstr("fusectl"), cstr(FUSECTL_DIR), cstr("fusectl"), 0n, null),
      "mount",
      FUSECTL_DIR,
    );
  }
  try {
    writeAttribute(`${FUSECTL_DIR}/${minor}/abort`, "1");
    log.info("Aborted FUSE connection {minor}", { minor });
    return "aborted";
  } catch (err) {
    if (isErrno(err, "ENOENT")) return "no-connection";
    throw err;
  } finally {
    if (!mounted) unmount(FUSECTL_DIR, { detach: true });
  }
}

/**
 * Set the readahead window of the mount whose `st_dev` is `majorMinor` (`"0:39"`), in KiB.
 * FUSE READ sizes in the page-cache path follow it; the kernel default is 128.
 * @throws {SysError} `ENOENT` when no such bdi exists
 */
export function setReadAheadKb(majorMinor: string, kb: number): void {
  if (!/^\d+:\d+$/.test(majorMinor) || !Number.isSafeInteger(kb) || kb < 0) {
    throw new RangeError(`Invalid readahead target "${majorMinor}" = ${kb} KiB`);
  }
  writeAttribute(`/sys/class/bdi/${majorMinor}/read_ahead_kb`, String(kb));
}

/** Close `fd`. @throws {SysError} `EBADF` when it is not open (a bug: double close) */
export function closeFd(fd: number): void {
  check(libc().close(fd), "close");
}

/** The target of `/proc/self/fd/<fd>`, e.g. `"/dev/fuse"` or `"socket:[1234]"`. @throws {SysError} */
export function fdTarget(fd: number): string {
  const path = `/proc/self/fd/${fd}`;
  const buf = alloc(4096);
  const n = check(libc().readlink(cstr(path), buf, BigInt(buf.length)), "readlink", path);
  return new TextDecoder().decode(buf.subarray(0, n));
}

/**
 * True when `fd` is open on the FUSE device, judged by what it is (a character device 10:229), not
 * by its path: the path `/proc/self/fd/<fd>` shows depends on the reader's root (a process in a
 * container or chroot sees the host's `/dev/fuse` under another name, or none).
 * @throws {Deno.errors.NotFound} when `fd` is not open
 */
export function isFuseDevice(fd: number): boolean {
  return isFuseDeviceFile(Deno.statSync(`/proc/self/fd/${fd}`));
}

/** True when `fd` has `FD_CLOEXEC`. @throws {SysError} */
export function isCloexec(fd: number): boolean {
  return (check(libc().fcntl(fd, F_GETFD, 0n), "fcntl") & FD_CLOEXEC) !== 0;
}

/**
 * Clear `FD_CLOEXEC` so a spawned engine inherits `fd` under the same number (it is then given
 * as `/dev/fd/<fd>`). Do it right before spawning: any other child would inherit it too.
 * @throws {SysError}
 */
export function clearCloexec(fd: number): void {
  const flags = check(libc().fcntl(fd, F_GETFD, 0n), "fcntl");
  check(libc().fcntl(fd, F_SETFD, BigInt(flags & ~FD_CLOEXEC)), "fcntl");
}
