/**
 * {@link FakeFiles}: an in-memory {@link Files} for unit tests. Paths are plain strings (no
 * normalisation beyond trailing slashes); parents must exist unless `recursive` is used, like the
 * real thing. Errors for chosen paths are injected with {@link FakeFiles.failStat}.
 *
 * @module
 */
import { SysError } from "./errno.ts";
import type { Files, FileStat, WriteFileOptions } from "./files.ts";

/** One stored file. */
export interface FakeFile {
  /** Content. */
  data: string;
  /** Permission bits. */
  mode: number;
  /** Owner uid. */
  uid: number;
  /** Owner gid. */
  gid: number;
}

function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

function norm(path: string): string {
  return path.length > 1 ? path.replace(/\/+$/, "") : path;
}

/** An in-memory file system. */
export class FakeFiles implements Files {
  /** Directories that exist. `/` always does. */
  readonly dirs: Set<string> = new Set(["/"]);
  /** Files by path. */
  readonly files: Map<string, FakeFile> = new Map();
  readonly #statFailures = new Map<string, Error>();

  /** Make `stat(path)` (and only it) throw `error` until cleared with `undefined`. */
  failStat(path: string, error: Error | undefined): void {
    if (error) this.#statFailures.set(norm(path), error);
    else this.#statFailures.delete(norm(path));
  }

  /** Create a directory and its parents (test setup). */
  addDir(path: string): void {
    let p = norm(path);
    while (p !== "/" && !this.dirs.has(p)) {
      this.dirs.add(p);
      p = parentOf(p);
    }
  }

  /** {@inheritDoc Files.stat} */
  stat(path: string): Promise<FileStat | undefined> {
    const p = norm(path);
    const failure = this.#statFailures.get(p);
    if (failure) return Promise.reject(failure);
    if (this.dirs.has(p)) {
      return Promise.resolve({ isDirectory: true, isFile: false, mode: 0o755 });
    }
    const f = this.files.get(p);
    return Promise.resolve(f ? { isDirectory: false, isFile: true, mode: f.mode } : undefined);
  }
  /** {@inheritDoc Files.mkdir} */
  mkdir(path: string, options: { recursive?: boolean; mode?: number } = {}): Promise<void> {
    const p = norm(path);
    if (options.recursive) this.addDir(p);
    else if (!this.dirs.has(parentOf(p))) {
      return Promise.reject(new SysError(2, "mkdir", { path }));
    } else this.dirs.add(p);
    return Promise.resolve();
  }
  /** {@inheritDoc Files.writeFile} */
  writeFile(path: string, data: string, options: WriteFileOptions = {}): Promise<void> {
    const p = norm(path);
    if (!this.dirs.has(parentOf(p))) return Promise.reject(new SysError(2, "open", { path }));
    this.files.set(p, {
      data,
      mode: options.mode ?? 0o600,
      uid: options.uid ?? 0,
      gid: options.gid ?? 0,
    });
    return Promise.resolve();
  }
  /** {@inheritDoc Files.readTextFile} */
  readTextFile(path: string): Promise<string | undefined> {
    return Promise.resolve(this.files.get(norm(path))?.data);
  }
  /** {@inheritDoc Files.remove} */
  remove(path: string, options: { recursive?: boolean } = {}): Promise<boolean> {
    const p = norm(path);
    if (this.files.delete(p)) return Promise.resolve(true);
    if (!this.dirs.has(p)) return Promise.resolve(false);
    const children = [...this.dirs, ...this.files.keys()].filter((x) => x.startsWith(`${p}/`));
    if (children.length > 0 && !options.recursive) {
      return Promise.reject(new SysError(39, "rmdir", { path }));
    }
    for (const c of children) {
      this.dirs.delete(c);
      this.files.delete(c);
    }
    this.dirs.delete(p);
    return Promise.resolve(true);
  }
  /** {@inheritDoc Files.readDir} */
  readDir(path: string): Promise<string[]> {
    const p = norm(path);
    const prefix = p === "/" ? "/" : `${p}/`;
    const names = [...this.dirs, ...this.files.keys()]
      .filter((x) => x.startsWith(prefix) && x !== p && !x.slice(prefix.length).includes("/"))
      .map((x) => x.slice(prefix.length));
    return Promise.resolve(names.sort());
  }
  /** {@inheritDoc Files.chown} */
  chown(path: string, uid: number, gid: number): Promise<void> {
    const f = this.files.get(norm(path));
    if (f) {
      f.uid = uid;
      f.gid = gid;
    }
    return Promise.resolve();
  }
}
