/**
 * {@link DirHandle}: the operations on a directory that someone else also writes (a Mountpoint
 * Pod's comm dir): relative to the open directory, single names, no link ever followed, regular
 * files only, bounded reads, no blocking, writes that cannot be redirected. `safe_dir.ts` is the
 * real implementation, `fake_files.ts` the in-memory one; `files_contract.ts` holds them to the
 * same behaviour.
 *
 * @module
 */

/** Options of {@link Files.writeFile}. */
export interface WriteFileOptions {
  /** Permission bits of the new file. @default 0o600 */
  readonly mode?: number;
  /** Owner of the file (chown after writing, before the rename). */
  readonly uid?: number;
  /** Group of the file. */
  readonly gid?: number;
}

/** What a name in a directory is, without following links. */
export type EntryKind = "file" | "directory" | "symlink" | "fifo" | "socket" | "device" | "other";

/** `lstat` of a name in a {@link DirHandle}. */
export interface EntryStat {
  readonly kind: EntryKind;
  /** Permission bits (`mode & 0o7777`). */
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly size: number;
  /** Hard links to the inode. */
  readonly nlink: number;
}

/**
 * An entry of an untrusted directory that is not what it must be (a symbolic link, a FIFO, a
 * device, a hard link, a directory where a file belongs, a file that changed while it was opened):
 * refused, never followed or read.
 */
export class UnsafeEntryError extends Error {
  override name = "UnsafeEntryError";
  /** Create an error about `name` in `dir`. */
  constructor(readonly dir: string, readonly entry: string, readonly problem: string) {
    super(
      `"${entry}" in ${dir} ${problem}: refused (the node plugin never follows links or reads anything but regular files there)`,
    );
  }
}

/** Options of {@link DirHandle.readFile}. */
export interface ReadFileOptions {
  /** Read at most this many bytes. */
  readonly maxBytes: number;
  /** Read the last `maxBytes` bytes instead of the first. @default false */
  readonly tail?: boolean;
}

/**
 * An open directory. Names are single path components (no `/`, `.` or `..`). Nothing follows a
 * symbolic link, nothing blocks (FIFOs are refused before they are read, and the directory may not
 * be on a FUSE file system), and nothing reaches outside the directory. There is no way to list
 * it: its other writer can put any number of names there, so the node plugin only ever works with
 * names it knows.
 */
export interface DirHandle extends Disposable {
  /** The directory's path (for messages). */
  readonly path: string;
  /** `lstat` of `name`; undefined when absent. */
  entry(name: string): Promise<EntryStat | undefined>;
  /**
   * Read a regular file (one hard link, not changed while opened), at most `maxBytes` of it, as
   * UTF-8; undefined when absent. @throws {UnsafeEntryError} for anything else
   */
  readFile(name: string, options: ReadFileOptions): Promise<string | undefined>;
  /**
   * Write `name` atomically: a new file (`O_EXCL|O_NOFOLLOW`) in this directory, owner and mode
   * set on its descriptor, then renamed over `name` (a symbolic link there is replaced, not
   * followed). @throws {UnsafeEntryError} when `name` is a directory
   */
  writeFile(name: string, data: string, options?: WriteFileOptions): Promise<void>;
  /**
   * Remove `name` without following it (a symbolic link goes, not its target); a directory only
   * with `directory` and only when empty. False when absent.
   */
  remove(name: string, options?: { directory?: boolean }): Promise<boolean>;
  /**
   * Open the subdirectory `name`, creating it first with `create.mode` when asked; undefined when
   * absent. @throws {UnsafeEntryError} when `name` is not a directory (e.g. a symbolic link)
   */
  subdir(name: string, options?: { create?: { mode: number } }): Promise<DirHandle | undefined>;
  /** Change this directory's owner and mode (through its descriptor). */
  setOwner(uid: number, gid: number, mode: number): Promise<void>;
  /**
   * A path that reaches the unix socket `name` without following links (`/proc/self/fd/<n>` of an
   * `O_PATH` descriptor of it), for `connect(2)`; dispose it after connecting. Undefined when
   * absent. @throws {UnsafeEntryError} when `name` is not a socket
   */
  socketPath(name: string): Promise<(Disposable & { readonly path: string }) | undefined>;
  /** Close the directory. Idempotent. */
  close(): void;
}
