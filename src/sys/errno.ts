/**
 * Linux errno values as typed errors. Every failed system call in `sys/` throws a {@link SysError}
 * whose `code` is the symbolic name (`"ENOENT"`), so callers branch with {@link isErrno} instead of
 * matching message text or magic numbers.
 *
 * The numbers are the asm-generic ones, identical on x86_64 and aarch64. This file is pure: it
 * makes no system call, so it can be used (and tested) without any permission.
 *
 * @module
 */

/** Symbolic errno names known to this module, with the number and libc's message for each. */
const ERRNOS = {
  EPERM: [1, "Operation not permitted"],
  ENOENT: [2, "No such file or directory"],
  ESRCH: [3, "No such process"],
  EINTR: [4, "Interrupted system call"],
  EIO: [5, "Input/output error"],
  ENXIO: [6, "No such device or address"],
  E2BIG: [7, "Argument list too long"],
  EBADF: [9, "Bad file descriptor"],
  EAGAIN: [11, "Resource temporarily unavailable"],
  ENOMEM: [12, "Cannot allocate memory"],
  EACCES: [13, "Permission denied"],
  EFAULT: [14, "Bad address"],
  ENOTBLK: [15, "Block device required"],
  EBUSY: [16, "Device or resource busy"],
  EEXIST: [17, "File exists"],
  EXDEV: [18, "Invalid cross-device link"],
  ENODEV: [19, "No such device"],
  ENOTDIR: [20, "Not a directory"],
  EISDIR: [21, "Is a directory"],
  EINVAL: [22, "Invalid argument"],
  ENFILE: [23, "Too many open files in system"],
  EMFILE: [24, "Too many open files"],
  ENOTTY: [25, "Inappropriate ioctl for device"],
  EFBIG: [27, "File too large"],
  ENOSPC: [28, "No space left on device"],
  ESPIPE: [29, "Illegal seek"],
  EROFS: [30, "Read-only file system"],
  EPIPE: [32, "Broken pipe"],
  ERANGE: [34, "Numerical result out of range"],
  EDEADLK: [35, "Resource deadlock avoided"],
  ENAMETOOLONG: [36, "File name too long"],
  ENOSYS: [38, "Function not implemented"],
  ENOTEMPTY: [39, "Directory not empty"],
  ELOOP: [40, "Too many levels of symbolic links"],
  ENOTSOCK: [88, "Socket operation on non-socket"],
  EMSGSIZE: [90, "Message too long"],
  EPROTOTYPE: [91, "Protocol wrong type for socket"],
  EOPNOTSUPP: [95, "Operation not supported"],
  EAFNOSUPPORT: [97, "Address family not supported by protocol"],
  EADDRINUSE: [98, "Address already in use"],
  EADDRNOTAVAIL: [99, "Cannot assign requested address"],
  ENETDOWN: [100, "Network is down"],
  ECONNABORTED: [103, "Software caused connection abort"],
  ECONNRESET: [104, "Connection reset by peer"],
  ENOBUFS: [105, "No buffer space available"],
  EISCONN: [106, "Transport endpoint is already connected"],
  ENOTCONN: [107, "Transport endpoint is not connected"],
  ETIMEDOUT: [110, "Connection timed out"],
  ECONNREFUSED: [111, "Connection refused"],
  EALREADY: [114, "Operation already in progress"],
  EINPROGRESS: [115, "Operation now in progress"],
  ESTALE: [116, "Stale file handle"],
  EDQUOT: [122, "Disk quota exceeded"],
  ECANCELED: [125, "Operation canceled"],
} as const satisfies Record<string, readonly [number, string]>;

/** A symbolic errno name such as `"ENOENT"`. */
export type ErrnoCode = keyof typeof ERRNOS;

const BY_NUMBER: ReadonlyMap<number, ErrnoCode> = new Map(
  (Object.entries(ERRNOS) as [ErrnoCode, readonly [number, string]][]).map((
    [code, [n]],
  ) => [n, code]),
);

/** The errno number of a symbolic name, e.g. `errnoNumber("ENOENT") === 2`. */
export function errnoNumber(code: ErrnoCode): number {
  return ERRNOS[code][0];
}

/** The symbolic name of an errno number, or `"E<n>"` for a number this module does not know. */
export function errnoName(errno: number): string {
  return BY_NUMBER.get(errno) ?? `E${errno}`;
}

/** libc's message for an errno number (`strerror` text), or `"Unknown error <n>"`. */
export function errnoMessage(errno: number): string {
  const code = BY_NUMBER.get(errno);
  return code ? ERRNOS[code][1] : `Unknown error ${errno}`;
}

/** Options for {@link SysError}. */
export interface SysErrorOptions extends ErrorOptions {
  /** The path the call was about, when there is one (quoted in the message). */
  readonly path?: string;
}

/**
 * A failed system call. `code` is the symbolic errno name, `errno` the number, `syscall` the libc
 * function that failed and `path` the file it was about (if any).
 *
 * The message reads `mount "/a/b": No such file or directory (ENOENT)`.
 */
export class SysError extends Error {
  override name = "SysError";
  /** Symbolic errno name, e.g. `"ENOENT"` (`"E<n>"` for a number not in the table). */
  readonly code: string;
  /** The path the call was about, when there is one. */
  readonly path: string | undefined;

  /** Create an error for `syscall` failing with `errno`. */
  constructor(readonly errno: number, readonly syscall: string, options: SysErrorOptions = {}) {
    const where = options.path === undefined ? syscall : `${syscall} "${options.path}"`;
    super(`${where}: ${errnoMessage(errno)} (${errnoName(errno)})`, options);
    this.code = errnoName(errno);
    this.path = options.path;
  }
}

/**
 * True when `err` is a {@link SysError} with one of `codes`. Deno's own errors carry a `code` too
 * (`Deno.errors.NotFound` has `code: "ENOENT"`), so those match as well.
 */
export function isErrno(err: unknown, ...codes: ErrnoCode[]): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" && (codes as string[]).includes(code);
}
