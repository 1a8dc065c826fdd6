/**
 * {@link Files}: the few file operations the node plugin and the mounter need (comm dir, credential
 * files, source and target directories), behind an interface so their logic is unit-tested with
 * {@link FakeFiles} (`fake_files.ts`) and no permissions.
 *
 * Every operation is async: the paths may sit on a FUSE mount served by another process, and a
 * synchronous call on a hung mount would freeze the event loop.
 *
 * Directories written by someone else — a Mountpoint Pod's comm dir, owned by an untrusted pod —
 * are used only through a {@link DirHandle} ({@link Files.openDir}): every operation is relative to
 * the open directory, takes a single name, never follows a symbolic link, reads regular files only
 * and only a bounded number of bytes, never blocks, and writes through a new file that cannot be
 * redirected (see `safe_dir.ts`).
 *
 * @module
 */
import type { DirHandle, WriteFileOptions } from "./dir_handle.ts";
import { RealDir } from "./safe_dir.ts";

export type {
  DirHandle,
  EntryKind,
  EntryStat,
  ReadFileOptions,
  WriteFileOptions,
} from "./dir_handle.ts";
export { UnsafeEntryError } from "./dir_handle.ts";

/** What {@link Files.stat} reports. */
export interface FileStat {
  /** A directory. */
  readonly isDirectory: boolean;
  /** A regular file. */
  readonly isFile: boolean;
  /** Permission bits (`mode & 0o7777`), when known. */
  readonly mode: number | undefined;
}

/** File-system operations. */
export interface Files {
  /** `stat(path)`; undefined when it does not exist. @throws other errors (e.g. `ENOTCONN`) */
  stat(path: string): Promise<FileStat | undefined>;
  /** Create a directory (and parents with `recursive`); an existing directory is fine. */
  mkdir(path: string, options?: { recursive?: boolean; mode?: number }): Promise<void>;
  /** Write `data` atomically (temp file + rename) with the given mode and owner. */
  writeFile(path: string, data: string, options?: WriteFileOptions): Promise<void>;
  /** Read a text file; undefined when it does not exist. */
  readTextFile(path: string): Promise<string | undefined>;
  /** Remove a file or an empty directory (everything with `recursive`); false when absent. */
  remove(path: string, options?: { recursive?: boolean }): Promise<boolean>;
  /**
   * Names in a directory; empty when it does not exist. Reads them all at once: only for
   * directories this process owns (never one a Mountpoint Pod can write, whose names are unbounded).
   */
  readDir(path: string): Promise<string[]>;
  /** Change owner. */
  chown(path: string, uid: number, gid: number): Promise<void>;
  /** Change permission bits. */
  chmod(path: string, mode: number): Promise<void>;
  /**
   * Open the directory `path` (its last component must not be a symbolic link) for the safe
   * operations of {@link DirHandle}; undefined when it does not exist.
   * @throws {UnsafeEntryError} when it is not a directory or is on a FUSE file system
   */
  openDir(path: string): Promise<DirHandle | undefined>;
  /**
   * Open and close the directory `path`: a round trip to its FUSE server when it is a FUSE mount
   * (`OPENDIR`), which the kernel's attribute cache cannot answer for a dead server.
   */
  touchDir(path: string): Promise<void>;
}

function notFound(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound;
}

/** {@link Files} on the real file system. Needs read/write permissions (the binaries run `-A`). */
export class RealFiles implements Files {
  /** {@inheritDoc Files.stat} */
  async stat(path: string): Promise<FileStat | undefined> {
    try {
      const s = await Deno.stat(path);
      return {
        isDirectory: s.isDirectory,
        isFile: s.isFile,
        mode: s.mode === null ? undefined : s.mode & 0o7777,
      };
    } catch (err) {
      if (notFound(err)) return undefined;
      throw err;
    }
  }
  /** {@inheritDoc Files.mkdir} */
  async mkdir(path: string, options: { recursive?: boolean; mode?: number } = {}): Promise<void> {
    try {
      await Deno.mkdir(path, {
        recursive: options.recursive ?? false,
        ...(options.mode !== undefined ? { mode: options.mode } : {}),
      });
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
    }
  }
  /** {@inheritDoc Files.writeFile} */
  async writeFile(path: string, data: string, options: WriteFileOptions = {}): Promise<void> {
    const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
    const mode = options.mode ?? 0o600;
    try {
      await Deno.writeTextFile(tmp, data, { mode, createNew: true });
      await Deno.chmod(tmp, mode);
      if (options.uid !== undefined || options.gid !== undefined) {
        await Deno.chown(tmp, options.uid ?? null, options.gid ?? null);
      }
      await Deno.rename(tmp, path);
    } catch (err) {
      await Deno.remove(tmp).catch(() => {});
      throw err;
    }
  }
  /** {@inheritDoc Files.readTextFile} */
  async readTextFile(path: string): Promise<string | undefined> {
    try {
      return await Deno.readTextFile(path);
    } catch (err) {
      if (notFound(err)) return undefined;
      throw err;
    }
  }
  /** {@inheritDoc Files.remove} */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<boolean> {
    try {
      await Deno.remove(path, { recursive: options.recursive ?? false });
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw err;
    }
  }
  /** {@inheritDoc Files.readDir} */
  async readDir(path: string): Promise<string[]> {
    const names: string[] = [];
    try {
      for await (const e of Deno.readDir(path)) names.push(e.name);
    } catch (err) {
      if (notFound(err)) return [];
      throw err;
    }
    return names.sort();
  }
  /** {@inheritDoc Files.chown} */
  chown(path: string, uid: number, gid: number): Promise<void> {
    return Deno.chown(path, uid, gid);
  }
  /** {@inheritDoc Files.chmod} */
  chmod(path: string, mode: number): Promise<void> {
    return Deno.chmod(path, mode);
  }
  /** {@inheritDoc Files.openDir} */
  openDir(path: string): Promise<DirHandle | undefined> {
    return Promise.resolve().then(() => RealDir.open(path));
  }
  /** {@inheritDoc Files.touchDir} */
  async touchDir(path: string): Promise<void> {
    const dir = await Deno.open(path, { read: true });
    dir.close();
  }
}
