/**
 * The FFI symbol table for glibc: the only `Deno.dlopen` in the project. The library is opened on
 * first use ({@link libc}), so importing this module (or anything under `sys/`) needs no
 * permission; calling into it needs `--allow-ffi` (in practice the binaries run with `-A`).
 *
 * Rules for callers (measured on Deno 2.9 before ADR 0003; `tests/sys/` exercises them):
 * - Every call except `poll` is synchronous and must never block: sockets are nonblocking and
 *   waiting happens in `poll`, declared `nonblocking: true` (it runs on Deno's blocking pool).
 * - errno is thread-local. Read it with {@link check} right after a synchronous call, on the JS
 *   thread; the `nonblocking` poll's errno is lost, so its `-1` is only retried.
 * - A buffer whose address is stored inside a struct (msghdr, iovec) must be allocated with
 *   {@link alloc} (its own `ArrayBuffer`, off the V8 heap) so it does not move.
 *
 * @module
 */
import { SysError } from "./errno.ts";

/** Name passed to `dlopen`; resolved by the dynamic loader like any `DT_NEEDED` entry. */
export const LIBC_NAME = "libc.so.6";

const SYMBOLS = {
  open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
  openat: { parameters: ["i32", "buffer", "i32", "u32"], result: "i32" },
  statx: { parameters: ["i32", "buffer", "i32", "u32", "buffer"], result: "i32" },
  fstatfs: { parameters: ["i32", "buffer"], result: "i32" },
  fchmod: { parameters: ["i32", "u32"], result: "i32" },
  fchown: { parameters: ["i32", "u32", "u32"], result: "i32" },
  mkdirat: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  unlinkat: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  renameat: { parameters: ["i32", "buffer", "i32", "buffer"], result: "i32" },
  pread: { parameters: ["i32", "buffer", "usize", "i64"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  readlink: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "buffer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  fcntl: { parameters: ["i32", "i32", "i64"], result: "i32" },
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  listen: { parameters: ["i32", "i32"], result: "i32" },
  accept4: { parameters: ["i32", "buffer", "buffer", "i32"], result: "i32" },
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  sendmsg: { parameters: ["i32", "buffer", "i32"], result: "isize" },
  recvmsg: { parameters: ["i32", "buffer", "i32"], result: "isize" },
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  execve: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  /** `poll(fds, nfds, timeoutMs)` on a blocking-pool thread; errno is not readable afterwards. */
  pollAsync: {
    name: "poll",
    parameters: ["buffer", "u64", "i32"],
    result: "i32",
    nonblocking: true,
  },
  __errno_location: { parameters: [], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The typed libc symbols. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let library: Deno.DynamicLibrary<typeof SYMBOLS> | undefined;

/** The libc symbols, opening the library on first use. @throws when FFI is not permitted */
export function libc(): Libc {
  library ??= Deno.dlopen(LIBC_NAME, SYMBOLS);
  return library.symbols;
}

// open(2)
/** `O_RDONLY`. */
export const O_RDONLY = 0;
/** `O_WRONLY`. */
export const O_WRONLY = 1;
/** `O_RDWR`. */
export const O_RDWR = 2;
/** `O_NONBLOCK`. */
export const O_NONBLOCK = 0o4000;
/** `O_CLOEXEC`. */
export const O_CLOEXEC = 0o2000000;
/** `O_DIRECTORY`. */
export const O_DIRECTORY = 0o200000;
/** `O_PATH`: a handle on a path, for `/proc/self/fd/<n>/…` resolution. */
export const O_PATH = 0o10000000;
/** `O_CREAT`. */
export const O_CREAT = 0o100;
/** `O_EXCL`. */
export const O_EXCL = 0o200;
/** `O_NOCTTY`. */
export const O_NOCTTY = 0o400;
/** `O_NOFOLLOW`: fail with `ELOOP` when the last component is a symbolic link. */
export const O_NOFOLLOW = 0o400000;

// *at(2)
/** `AT_FDCWD`. */
export const AT_FDCWD = -100;
/** `AT_SYMLINK_NOFOLLOW`. */
export const AT_SYMLINK_NOFOLLOW = 0x100;
/** `AT_REMOVEDIR` (unlinkat). */
export const AT_REMOVEDIR = 0x200;
/** `AT_EMPTY_PATH`: operate on the dirfd itself. */
export const AT_EMPTY_PATH = 0x1000;
/** `STATX_BASIC_STATS`. */
export const STATX_BASIC_STATS = 0x7ff;

// file types (st_mode & S_IFMT)
/** `S_IFMT`. */
export const S_IFMT = 0o170000;
/** `S_IFREG`. */
export const S_IFREG = 0o100000;
/** `S_IFDIR`. */
export const S_IFDIR = 0o040000;
/** `S_IFLNK`. */
export const S_IFLNK = 0o120000;
/** `S_IFIFO`. */
export const S_IFIFO = 0o010000;
/** `S_IFSOCK`. */
export const S_IFSOCK = 0o140000;
/** `S_IFCHR`. */
export const S_IFCHR = 0o020000;
/** `S_IFBLK`. */
export const S_IFBLK = 0o060000;
/** statfs `f_type` of FUSE file systems. */
export const FUSE_SUPER_MAGIC = 0x65735546;

// mount(2) and umount2(2)
/** `MS_RDONLY`. */
export const MS_RDONLY = 1;
/** `MS_NOSUID`. */
export const MS_NOSUID = 2;
/** `MS_NODEV`. */
export const MS_NODEV = 4;
/** `MS_REMOUNT`. */
export const MS_REMOUNT = 32;
/** `MS_NOATIME`. */
export const MS_NOATIME = 1024;
/** `MS_BIND`. */
export const MS_BIND = 4096;
/** `MS_REC`. */
export const MS_REC = 16384;
/** `MS_PRIVATE`. */
export const MS_PRIVATE = 1 << 18;
/** `MNT_FORCE`. */
export const MNT_FORCE = 1;
/** `MNT_DETACH`. */
export const MNT_DETACH = 2;

// fcntl(2)
/** `F_GETFD`. */
export const F_GETFD = 1;
/** `F_SETFD`. */
export const F_SETFD = 2;
/** `F_GETFL`. */
export const F_GETFL = 3;
/** `FD_CLOEXEC`. */
export const FD_CLOEXEC = 1;

// sockets
/** `AF_UNIX`. */
export const AF_UNIX = 1;
/** `SOCK_STREAM`. */
export const SOCK_STREAM = 1;
/** `SOCK_NONBLOCK` (same value as `O_NONBLOCK`). */
export const SOCK_NONBLOCK = 0o4000;
/** `SOCK_CLOEXEC` (same value as `O_CLOEXEC`). */
export const SOCK_CLOEXEC = 0o2000000;
/** `SOL_SOCKET`. */
export const SOL_SOCKET = 1;
/** `SO_ERROR`. */
export const SO_ERROR = 4;
/** `SO_PEERCRED`. */
export const SO_PEERCRED = 17;
/** `SCM_RIGHTS`. */
export const SCM_RIGHTS = 1;
/** `MSG_CTRUNC`: control data was truncated (fds were lost). */
export const MSG_CTRUNC = 0x8;
/** `MSG_TRUNC`. */
export const MSG_TRUNC = 0x20;
/** `MSG_NOSIGNAL`: EPIPE instead of SIGPIPE. */
export const MSG_NOSIGNAL = 0x4000;
/** `MSG_CMSG_CLOEXEC`: received fds get `FD_CLOEXEC`. */
export const MSG_CMSG_CLOEXEC = 0x40000000;

// poll(2) and eventfd(2)
/** `POLLIN`. */
export const POLLIN = 0x1;
/** `POLLOUT`. */
export const POLLOUT = 0x4;
/** `POLLERR`. */
export const POLLERR = 0x8;
/** `POLLHUP`. */
export const POLLHUP = 0x10;
/** `POLLNVAL`. */
export const POLLNVAL = 0x20;
/** `EFD_NONBLOCK`. */
export const EFD_NONBLOCK = 0o4000;
/** `EFD_CLOEXEC`. */
export const EFD_CLOEXEC = 0o2000000;

const encoder = new TextEncoder();

/** A NUL-terminated copy of `s` for a `buffer` parameter. @throws {TypeError} if `s` holds a NUL */
export function cstr(s: string): Uint8Array<ArrayBuffer> {
  if (s.includes("\0")) throw new TypeError(`String contains a NUL byte: ${JSON.stringify(s)}`);
  const bytes = encoder.encode(s);
  const out = alloc(bytes.length + 1);
  out.set(bytes);
  return out;
}

/** A zeroed buffer with its own `ArrayBuffer`, safe to reference from a struct. */
export function alloc(size: number): Uint8Array<ArrayBuffer> {
  return new Uint8Array(new ArrayBuffer(size));
}

/** The address of `buffer` (including its `byteOffset`) as a number for a struct field. */
export function addressOf(buffer: Uint8Array<ArrayBuffer>): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buffer)));
}

/** The calling thread's errno. Only meaningful right after a failed synchronous call. */
export function errno(): number {
  const location = libc().__errno_location();
  if (location === null) return 0;
  return new Deno.UnsafePointerView(location).getInt32();
}

/**
 * Return `result` when it is not negative; otherwise read errno at once and throw a
 * {@link SysError}. Use it as `check(libc().close(fd), "close")` so nothing runs in between.
 */
export function check(result: number | bigint, syscall: string, path?: string): number {
  const n = Number(result);
  if (n >= 0) return n;
  const e = errno();
  throw new SysError(e, syscall, path === undefined ? {} : { path });
}
