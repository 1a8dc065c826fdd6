/**
 * {@link RealDir}: {@link DirHandle} on the real kernel, through `*at(2)` system calls relative to
 * a directory descriptor (FFI, `libc.ts`). What makes it safe against the directory's other
 * writer (an untrusted Mountpoint Pod that may swap any name for a symbolic link, a FIFO or a huge
 * file at any moment):
 *
 * - Every name is one path component, resolved relative to the directory descriptor with
 *   `O_NOFOLLOW`, so nothing reaches outside the directory.
 * - A file is read only after `statx(AT_SYMLINK_NOFOLLOW)` says "regular file, one link", and
 *   the descriptor then opened (`O_NOFOLLOW|O_NONBLOCK`) must be that same inode: a FIFO is never
 *   opened for reading, a swap between the two steps is detected. Reads take at most the bytes
 *   asked for (`pread`).
 * - A file is written as a new file (`O_CREAT|O_EXCL|O_NOFOLLOW`), its owner and mode set on the
 *   descriptor (`fchown`/`fchmod`, no path involved), then `renameat` over the name, within the
 *   directory: whatever the name was (link, file), it is replaced, never followed.
 * - Removal is `unlinkat`: a symbolic link is removed, not its target.
 * - The directory may not be on a FUSE file system, so no call here can wait for a user-space
 *   server: all are synchronous FFI calls that return at once (tmpfs or a local disk).
 *
 * @module
 */
import {
  type DirHandle,
  type EntryKind,
  type EntryStat,
  type ReadFileOptions,
  UnsafeEntryError,
  type WriteFileOptions,
} from "./dir_handle.ts";
import { isErrno, SysError } from "./errno.ts";
import {
  alloc,
  AT_EMPTY_PATH,
  AT_FDCWD,
  AT_REMOVEDIR,
  AT_SYMLINK_NOFOLLOW,
  check,
  cstr,
  FUSE_SUPER_MAGIC,
  libc,
  O_CLOEXEC,
  O_CREAT,
  O_DIRECTORY,
  O_EXCL,
  O_NOCTTY,
  O_NOFOLLOW,
  O_NONBLOCK,
  O_PATH,
  O_RDONLY,
  O_WRONLY,
  S_IFBLK,
  S_IFCHR,
  S_IFDIR,
  S_IFIFO,
  S_IFLNK,
  S_IFMT,
  S_IFREG,
  S_IFSOCK,
  STATX_BASIC_STATS,
} from "./libc.ts";

const STATX_BYTES = 256;
const EMPTY = cstr("");
/** `(uid_t)-1`: leave the owner (or group) as it is. */
const NO_CHANGE = 0xffff_ffff;

interface Statx extends EntryStat {
  readonly ino: bigint;
  readonly dev: string;
}

function kindOf(mode: number): EntryKind {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "file";
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symlink";
    case S_IFIFO:
      return "fifo";
    case S_IFSOCK:
      return "socket";
    case S_IFCHR:
    case S_IFBLK:
      return "device";
    default:
      return "other";
  }
}

/** `statx(dirfd, name, flags)`; undefined on ENOENT. */
function statx(
  dirfd: number,
  name: Uint8Array<ArrayBuffer>,
  flags: number,
  what: string,
): Statx | undefined {
  const buf = alloc(STATX_BYTES);
  try {
    check(
      libc().statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, buf),
      "statx",
      what,
    );
  } catch (err) {
    if (isErrno(err, "ENOENT")) return undefined;
    throw err;
  }
  const v = new DataView(buf.buffer);
  const mode = v.getUint16(28, true);
  return {
    kind: kindOf(mode),
    mode: mode & 0o7777,
    uid: v.getUint32(20, true),
    gid: v.getUint32(24, true),
    nlink: v.getUint32(16, true),
    size: Number(v.getBigUint64(40, true)),
    ino: v.getBigUint64(32, true),
    dev: `${v.getUint32(136, true)}:${v.getUint32(140, true)}`,
  };
}

function close(fd: number): void {
  libc().close(fd);
}

/** Check that `name` is one path component. @throws {TypeError} */
export function checkName(name: string): Uint8Array<ArrayBuffer> {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new TypeError(`"${name}" is not a single file name`);
  }
  return cstr(name);
}

/** {@link DirHandle} on an open directory descriptor. */
export class RealDir implements DirHandle {
  #fd: number;

  private constructor(readonly path: string, fd: number) {
    this.#fd = fd;
  }

  /**
   * Open `path` (`O_DIRECTORY|O_NOFOLLOW`: its last component may not be a link); undefined when
   * it does not exist. @throws {UnsafeEntryError} not a directory, or on a FUSE file system
   */
  static open(path: string): RealDir | undefined {
    let fd: number;
    try {
      fd = check(
        libc().openat(AT_FDCWD, cstr(path), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0),
        "open",
        path,
      );
    } catch (err) {
      if (isErrno(err, "ENOENT")) return undefined;
      if (isErrno(err, "ELOOP", "ENOTDIR")) {
        throw new UnsafeEntryError(
          path.replace(/\/[^/]*$/, "") || "/",
          path.replace(/^.*\//, ""),
          "is not a directory",
        );
      }
      throw err;
    }
    return RealDir.#checked(path, fd);
  }

  static #checked(path: string, fd: number): RealDir {
    try {
      const fs = alloc(128);
      check(libc().fstatfs(fd, fs), "fstatfs", path);
      // f_type is the first field (a long) on every 64-bit Linux.
      if (Number(new DataView(fs.buffer).getBigInt64(0, true)) === FUSE_SUPER_MAGIC) {
        throw new UnsafeEntryError(path, ".", "is on a FUSE file system (it could block)");
      }
    } catch (err) {
      close(fd);
      throw err;
    }
    return new RealDir(path, fd);
  }

  #dirfd(): number {
    if (this.#fd < 0) throw new SysError(9, "openat", { path: this.path });
    return this.#fd;
  }

  /** {@inheritDoc DirHandle.entry} */
  entry(name: string): Promise<EntryStat | undefined> {
    return Promise.resolve().then(() => {
      const s = statx(this.#dirfd(), checkName(name), 0, `${this.path}/${name}`);
      return s &&
        { kind: s.kind, mode: s.mode, uid: s.uid, gid: s.gid, size: s.size, nlink: s.nlink };
    });
  }

  /** {@inheritDoc DirHandle.readFile} */
  readFile(name: string, options: ReadFileOptions): Promise<string | undefined> {
    return Promise.resolve().then(() => {
      const dirfd = this.#dirfd();
      const cname = checkName(name);
      const where = `${this.path}/${name}`;
      const before = statx(dirfd, cname, 0, where);
      if (!before) return undefined;
      if (before.kind !== "file") {
        throw new UnsafeEntryError(this.path, name, `is a ${before.kind}, not a regular file`);
      }
      if (before.nlink !== 1) {
        throw new UnsafeEntryError(this.path, name, `has ${before.nlink} hard links`);
      }
      let fd: number;
      try {
        fd = check(
          libc().openat(dirfd, cname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0),
          "open",
          where,
        );
      } catch (err) {
        if (isErrno(err, "ENOENT")) return undefined;
        if (isErrno(err, "ELOOP")) {
          throw new UnsafeEntryError(this.path, name, "became a symbolic link");
        }
        throw err;
      }
      try {
        const after = statx(fd, EMPTY, AT_EMPTY_PATH, where);
        if (
          !after || after.kind !== "file" || after.ino !== before.ino || after.dev !== before.dev ||
          after.nlink !== 1
        ) {
          throw new UnsafeEntryError(this.path, name, "changed while it was opened");
        }
        const want = Math.max(0, Math.min(options.maxBytes, after.size));
        const offset = options.tail ? Math.max(0, after.size - options.maxBytes) : 0;
        const buf = alloc(want);
        let got = 0;
        while (got < want) {
          const n = check(
            libc().pread(fd, buf.subarray(got), BigInt(want - got), BigInt(offset + got)),
            "pread",
            where,
          );
          if (n === 0) break;
          got += n;
        }
        return new TextDecoder().decode(buf.subarray(0, got));
      } finally {
        close(fd);
      }
    });
  }

  /** {@inheritDoc DirHandle.writeFile} */
  writeFile(name: string, data: string, options: WriteFileOptions = {}): Promise<void> {
    return Promise.resolve().then(() => {
      const dirfd = this.#dirfd();
      const target = checkName(name);
      const tmpName = `.${name}.tmp-${crypto.randomUUID().slice(0, 8)}`;
      const tmp = cstr(tmpName);
      const where = `${this.path}/${name}`;
      const existing = statx(dirfd, target, 0, where);
      if (existing?.kind === "directory") {
        throw new UnsafeEntryError(this.path, name, "is a directory");
      }
      const fd = check(
        libc().openat(
          dirfd,
          tmp,
          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
          0o600,
        ),
        "open",
        `${this.path}/${tmpName}`,
      );
      let renamed = false;
      try {
        try {
          if (options.uid !== undefined || options.gid !== undefined) {
            check(
              libc().fchown(fd, options.uid ?? NO_CHANGE, options.gid ?? NO_CHANGE),
              "fchown",
              where,
            );
          }
          check(libc().fchmod(fd, options.mode ?? 0o600), "fchmod", where);
          const bytes = new TextEncoder().encode(data);
          const buf = alloc(bytes.length);
          buf.set(bytes);
          let written = 0;
          while (written < buf.length) {
            written += check(
              libc().write(fd, buf.subarray(written), BigInt(buf.length - written)),
              "write",
              where,
            );
          }
        } finally {
          close(fd);
        }
        check(libc().renameat(dirfd, tmp, dirfd, target), "renameat", where);
        renamed = true;
      } finally {
        if (!renamed) libc().unlinkat(dirfd, tmp, 0);
      }
    });
  }

  /** {@inheritDoc DirHandle.remove} */
  remove(name: string, options: { directory?: boolean } = {}): Promise<boolean> {
    return Promise.resolve().then(() => {
      const dirfd = this.#dirfd();
      const cname = checkName(name);
      const where = `${this.path}/${name}`;
      try {
        check(libc().unlinkat(dirfd, cname, 0), "unlinkat", where);
        return true;
      } catch (err) {
        if (isErrno(err, "ENOENT")) return false;
        if (!isErrno(err, "EISDIR") || !options.directory) throw err;
      }
      try {
        check(libc().unlinkat(dirfd, cname, AT_REMOVEDIR), "unlinkat", where);
        return true;
      } catch (err) {
        if (isErrno(err, "ENOENT")) return false;
        throw err;
      }
    });
  }

  /** {@inheritDoc DirHandle.subdir} */
  subdir(
    name: string,
    options: { create?: { mode: number } } = {},
  ): Promise<DirHandle | undefined> {
    return Promise.resolve().then(() => {
      const dirfd = this.#dirfd();
      const cname = checkName(name);
      const where = `${this.path}/${name}`;
      if (options.create) {
        try {
          check(libc().mkdirat(dirfd, cname, options.create.mode), "mkdirat", where);
        } catch (err) {
          if (!isErrno(err, "EEXIST")) throw err;
        }
      }
      let fd: number;
      try {
        fd = check(
          libc().openat(dirfd, cname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0),
          "open",
          where,
        );
      } catch (err) {
        if (isErrno(err, "ENOENT")) return undefined;
        if (isErrno(err, "ELOOP", "ENOTDIR")) {
          const s = statx(dirfd, cname, 0, where);
          throw new UnsafeEntryError(
            this.path,
            name,
            `is a ${s?.kind ?? "changing entry"}, not a directory`,
          );
        }
        throw err;
      }
      return new RealDir(where, fd);
    });
  }

  /** {@inheritDoc DirHandle.setOwner} */
  setOwner(uid: number, gid: number, mode: number): Promise<void> {
    return Promise.resolve().then(() => {
      const fd = this.#dirfd();
      check(libc().fchown(fd, uid, gid), "fchown", this.path);
      check(libc().fchmod(fd, mode), "fchmod", this.path);
    });
  }

  /** {@inheritDoc DirHandle.socketPath} */
  socketPath(name: string): Promise<(Disposable & { readonly path: string }) | undefined> {
    return Promise.resolve().then(() => {
      const dirfd = this.#dirfd();
      const where = `${this.path}/${name}`;
      let fd: number;
      try {
        fd = check(
          libc().openat(dirfd, checkName(name), O_PATH | O_NOFOLLOW | O_CLOEXEC, 0),
          "open",
          where,
        );
      } catch (err) {
        if (isErrno(err, "ENOENT")) return undefined;
        throw err;
      }
      const s = statx(fd, EMPTY, AT_EMPTY_PATH, where);
      if (s?.kind !== "socket") {
        close(fd);
        throw new UnsafeEntryError(
          this.path,
          name,
          `is a ${s?.kind ?? "vanished entry"}, not a socket`,
        );
      }
      let open = true;
      return {
        path: `/proc/self/fd/${fd}`,
        [Symbol.dispose]() {
          if (open) close(fd);
          open = false;
        },
      };
    });
  }

  /** {@inheritDoc DirHandle.close} */
  close(): void {
    if (this.#fd >= 0) close(this.#fd);
    this.#fd = -1;
  }

  /** Same as {@link close}. */
  [Symbol.dispose](): void {
    this.close();
  }
}
