/**
 * {@link FakeFiles}: an in-memory {@link Files} for unit tests. Paths are plain strings (no
 * normalisation beyond trailing slashes); parents must exist unless `recursive` is used, like the
 * real thing. Symbolic links, FIFOs, sockets and devices can be planted ({@link FakeFiles.plant})
 * to play a hostile Mountpoint Pod; {@link FakeDir} refuses them like the real `safe_dir.ts` does
 * (`files_contract.ts` holds both to the same behaviour). Errors for chosen paths are injected
 * with {@link FakeFiles.failStat}, hangs with {@link FakeFiles.hang}.
 *
 * @module
 */
import { type DirHandle, type EntryKind, type EntryStat, UnsafeEntryError } from "./dir_handle.ts";
import { SysError } from "./errno.ts";
import type { Files, FileStat, ReadFileOptions, WriteFileOptions } from "./files.ts";

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
  /** Hard links. @default 1 */
  nlink?: number;
}

/** A planted entry that is neither a file nor a directory. */
export interface FakeSpecial {
  readonly kind: Exclude<EntryKind, "file" | "directory">;
  /** Where a symbolic link points. */
  readonly target?: string;
}

function parentOf(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

function norm(path: string): string {
  return path.length > 1 ? path.replace(/\/+$/, "") : path;
}

function checkName(name: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new TypeError(`"${name}" is not a single file name`);
  }
}

/** An in-memory file system. */
export class FakeFiles implements Files {
  /** Directories that exist. `/` always does. */
  readonly dirs: Set<string> = new Set(["/"]);
  /** Owner and mode of directories set through {@link DirHandle.setOwner} or `chmod`. */
  readonly dirMeta: Map<string, { uid: number; gid: number; mode: number }> = new Map();
  /** Files by path. */
  readonly files: Map<string, FakeFile> = new Map();
  /** Planted links, FIFOs, sockets and devices by path. */
  readonly specials: Map<string, FakeSpecial> = new Map();
  /** Number of `stat` and `touchDir` calls per path (to count probes). */
  readonly probes: Map<string, number> = new Map();
  readonly #statFailures = new Map<string, Error>();
  readonly #hangs = new Map<string, ((err: Error) => void)[]>();

  /** Make `stat(path)` and `touchDir(path)` throw `error` until cleared with `undefined`. */
  failStat(path: string, error: Error | undefined): void {
    if (error) this.#statFailures.set(norm(path), error);
    else this.#statFailures.delete(norm(path));
  }

  /**
   * Make `stat(path)` and `touchDir(path)` never answer (a hung FUSE mount). Clearing it (`false`)
   * fails the pending calls with `ENOTCONN`, as aborting the FUSE connection does.
   */
  hang(path: string, hung = true): void {
    const p = norm(path);
    if (hung) {
      if (!this.#hangs.has(p)) this.#hangs.set(p, []);
      return;
    }
    for (const fail of this.#hangs.get(p) ?? []) fail(new SysError(107, "stat", { path }));
    this.#hangs.delete(p);
  }

  /** Create a directory and its parents (test setup). */
  addDir(path: string): void {
    let p = norm(path);
    while (p !== "/" && !this.dirs.has(p)) {
      this.dirs.add(p);
      p = parentOf(p);
    }
  }

  /** Plant a symbolic link, FIFO, socket or device at `path` (test setup). */
  plant(path: string, special: FakeSpecial): void {
    const p = norm(path);
    this.files.delete(p);
    this.specials.set(p, special);
  }

  #probe(path: string): Promise<void> | undefined {
    const p = norm(path);
    this.probes.set(p, (this.probes.get(p) ?? 0) + 1);
    const pending = this.#hangs.get(p);
    if (pending) return new Promise((_, reject) => pending.push(reject));
    const failure = this.#statFailures.get(p);
    if (failure) return Promise.reject(failure);
    return undefined;
  }

  /** {@inheritDoc Files.stat} */
  stat(path: string): Promise<FileStat | undefined> {
    const p = norm(path);
    const probe = this.#probe(p);
    if (probe) return probe.then(() => undefined);
    if (this.dirs.has(p)) {
      return Promise.resolve({
        isDirectory: true,
        isFile: false,
        mode: this.dirMeta.get(p)?.mode ?? 0o755,
      });
    }
    if (this.specials.has(p)) {
      return Promise.resolve({ isDirectory: false, isFile: false, mode: 0o777 });
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
    if (options.mode !== undefined && !this.dirMeta.has(p)) {
      this.dirMeta.set(p, { uid: 0, gid: 0, mode: options.mode });
    }
    return Promise.resolve();
  }
  /** {@inheritDoc Files.writeFile} */
  writeFile(path: string, data: string, options: WriteFileOptions = {}): Promise<void> {
    const p = norm(path);
    if (!this.dirs.has(parentOf(p))) return Promise.reject(new SysError(2, "open", { path }));
    this.specials.delete(p);
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
    if (this.files.delete(p) || this.specials.delete(p)) return Promise.resolve(true);
    if (!this.dirs.has(p)) return Promise.resolve(false);
    const children = this.#under(p);
    if (children.length > 0 && !options.recursive) {
      return Promise.reject(new SysError(39, "rmdir", { path }));
    }
    for (const c of children) {
      this.dirs.delete(c);
      this.files.delete(c);
      this.specials.delete(c);
    }
    this.dirs.delete(p);
    this.dirMeta.delete(p);
    return Promise.resolve(true);
  }
  #under(p: string): string[] {
    return [...this.dirs, ...this.files.keys(), ...this.specials.keys()].filter((x) =>
      x.startsWith(`${p}/`)
    );
  }
  /** Names directly in `p`. */
  children(p: string): string[] {
    const prefix = p === "/" ? "/" : `${p}/`;
    return [...this.dirs, ...this.files.keys(), ...this.specials.keys()]
      .filter((x) => x.startsWith(prefix) && x !== p && !x.slice(prefix.length).includes("/"))
      .map((x) => x.slice(prefix.length))
      .sort();
  }
  /** {@inheritDoc Files.readDir} */
  readDir(path: string): Promise<string[]> {
    return Promise.resolve(this.children(norm(path)));
  }
  /** {@inheritDoc Files.chown} */
  chown(path: string, uid: number, gid: number): Promise<void> {
    const p = norm(path);
    const f = this.files.get(p);
    if (f) {
      f.uid = uid;
      f.gid = gid;
    } else if (this.dirs.has(p)) {
      const m = this.dirMeta.get(p) ?? { uid: 0, gid: 0, mode: 0o755 };
      this.dirMeta.set(p, { ...m, uid, gid });
    }
    return Promise.resolve();
  }
  /** {@inheritDoc Files.chmod} */
  chmod(path: string, mode: number): Promise<void> {
    const p = norm(path);
    const f = this.files.get(p);
    if (f) f.mode = mode;
    else if (this.dirs.has(p)) {
      const m = this.dirMeta.get(p) ?? { uid: 0, gid: 0, mode: 0o755 };
      this.dirMeta.set(p, { ...m, mode });
    } else return Promise.reject(new SysError(2, "chmod", { path }));
    return Promise.resolve();
  }
  /** {@inheritDoc Files.openDir} */
  openDir(path: string): Promise<DirHandle | undefined> {
    const p = norm(path);
    if (this.dirs.has(p)) return Promise.resolve(new FakeDir(this, p));
    const kind = this.specials.get(p)?.kind ?? (this.files.has(p) ? "file" : undefined);
    if (kind === undefined) return Promise.resolve(undefined);
    return Promise.reject(
      new UnsafeEntryError(parentOf(p), p.slice(parentOf(p).length + 1), "is not a directory"),
    );
  }
  /** {@inheritDoc Files.touchDir} */
  touchDir(path: string): Promise<void> {
    const probe = this.#probe(path);
    if (probe) return probe;
    if (!this.dirs.has(norm(path))) return Promise.reject(new SysError(2, "open", { path }));
    return Promise.resolve();
  }
}

/** {@link DirHandle} over {@link FakeFiles}, with the same refusals as the real one. */
export class FakeDir implements DirHandle {
  #open = true;
  constructor(readonly fs: FakeFiles, readonly path: string) {}

  #p(name: string): string {
    if (!this.#open) throw new SysError(9, "openat", { path: this.path });
    checkName(name);
    return `${this.path}/${name}`;
  }

  /** {@inheritDoc DirHandle.entry} */
  entry(name: string): Promise<EntryStat | undefined> {
    return Promise.resolve().then(() => {
      const p = this.#p(name);
      const f = this.fs.files.get(p);
      if (f) {
        return {
          kind: "file",
          mode: f.mode,
          uid: f.uid,
          gid: f.gid,
          size: new TextEncoder().encode(f.data).length,
          nlink: f.nlink ?? 1,
        };
      }
      if (this.fs.dirs.has(p)) {
        const m = this.fs.dirMeta.get(p) ?? { uid: 0, gid: 0, mode: 0o755 };
        return { kind: "directory", ...m, size: 0, nlink: 2 };
      }
      const s = this.fs.specials.get(p);
      return s && { kind: s.kind, mode: 0o777, uid: 0, gid: 0, size: 0, nlink: 1 };
    });
  }

  /** {@inheritDoc DirHandle.readFile} */
  readFile(name: string, options: ReadFileOptions): Promise<string | undefined> {
    return this.entry(name).then((e) => {
      if (!e) return undefined;
      if (e.kind !== "file") {
        throw new UnsafeEntryError(this.path, name, `is a ${e.kind}, not a regular file`);
      }
      if (e.nlink !== 1) throw new UnsafeEntryError(this.path, name, `has ${e.nlink} hard links`);
      const bytes = new TextEncoder().encode(this.fs.files.get(this.#p(name))!.data);
      const part = options.tail
        ? bytes.subarray(Math.max(0, bytes.length - options.maxBytes))
        : bytes.subarray(0, options.maxBytes);
      return new TextDecoder().decode(part);
    });
  }

  /** {@inheritDoc DirHandle.writeFile} */
  writeFile(name: string, data: string, options: WriteFileOptions = {}): Promise<void> {
    return Promise.resolve().then(() => {
      const p = this.#p(name);
      if (this.fs.dirs.has(p)) throw new UnsafeEntryError(this.path, name, "is a directory");
      this.fs.specials.delete(p);
      this.fs.files.set(p, {
        data,
        mode: options.mode ?? 0o600,
        uid: options.uid ?? 0,
        gid: options.gid ?? 0,
      });
    });
  }

  /** {@inheritDoc DirHandle.remove} */
  remove(name: string, options: { directory?: boolean } = {}): Promise<boolean> {
    return Promise.resolve().then(() => {
      const p = this.#p(name);
      if (this.fs.files.delete(p) || this.fs.specials.delete(p)) return true;
      if (!this.fs.dirs.has(p)) return false;
      if (!options.directory) throw new SysError(21, "unlinkat", { path: p });
      if (this.fs.children(p).length > 0) throw new SysError(39, "unlinkat", { path: p });
      this.fs.dirs.delete(p);
      this.fs.dirMeta.delete(p);
      return true;
    });
  }

  /** {@inheritDoc DirHandle.subdir} */
  subdir(
    name: string,
    options: { create?: { mode: number } } = {},
  ): Promise<DirHandle | undefined> {
    return Promise.resolve().then(() => {
      const p = this.#p(name);
      const absent = !this.fs.dirs.has(p) && !this.fs.files.has(p) && !this.fs.specials.has(p);
      if (absent && options.create) {
        this.fs.dirs.add(p);
        this.fs.dirMeta.set(p, { uid: 0, gid: 0, mode: options.create.mode });
      }
      if (this.fs.dirs.has(p)) return new FakeDir(this.fs, p);
      const kind = this.fs.specials.get(p)?.kind ?? (this.fs.files.has(p) ? "file" : undefined);
      if (kind === undefined) return undefined;
      throw new UnsafeEntryError(this.path, name, `is a ${kind}, not a directory`);
    });
  }

  /** {@inheritDoc DirHandle.setOwner} */
  setOwner(uid: number, gid: number, mode: number): Promise<void> {
    this.fs.dirMeta.set(this.path, { uid, gid, mode });
    return Promise.resolve();
  }

  /** {@inheritDoc DirHandle.socketPath} */
  socketPath(name: string): Promise<(Disposable & { readonly path: string }) | undefined> {
    return this.entry(name).then((e) => {
      if (!e) return undefined;
      if (e.kind !== "socket") {
        throw new UnsafeEntryError(this.path, name, `is a ${e.kind}, not a socket`);
      }
      return { path: this.#p(name), [Symbol.dispose]() {} };
    });
  }

  /** {@inheritDoc DirHandle.close} */
  close(): void {
    this.#open = false;
  }

  /** Same as {@link close}. */
  [Symbol.dispose](): void {
    this.close();
  }
}
