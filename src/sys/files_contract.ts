/**
 * A behaviour suite for {@link Files.openDir} and its {@link DirHandle}: `fake_files_test.ts` runs
 * it against {@link FakeFiles} (no permissions) and `tests/sys/real_files_test.ts` against
 * `RealFiles` as root, so the fake refuses exactly what the kernel-backed one refuses. Never
 * imported by `cmd/`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Files, UnsafeEntryError } from "./files.ts";

/** One fresh environment for a contract case. */
export interface FilesContractTarget extends AsyncDisposable {
  readonly files: Files;
  /** An empty directory the case may use. */
  readonly dir: string;
  /** As the other writer: create a regular file. */
  writeRaw(path: string, data: string): Promise<void>;
  /** As the other writer: plant a symbolic link to `target`. */
  symlink(target: string, path: string): Promise<void>;
  /** As the other writer: plant a FIFO. */
  fifo(path: string): Promise<void>;
  /** As the other writer: add a hard link to an existing file. */
  hardlink(existing: string, path: string): Promise<void>;
}

/** Options of {@link filesContract}. */
export interface FilesContractOptions {
  /** Skip every case, with this reason in the test names. */
  readonly skipReason?: string | undefined;
}

const unsafe = (e: unknown) => e instanceof UnsafeEntryError;

/** Register the contract cases with `Deno.test`, prefixed by `name`. */
export function filesContract(
  name: string,
  make: () => Promise<FilesContractTarget>,
  options: FilesContractOptions = {},
): void {
  const test = (title: string, fn: (t: FilesContractTarget) => Promise<void>) =>
    Deno.test({
      name: `${name}: ${title}${options.skipReason ? ` (skipped: ${options.skipReason})` : ""}`,
      ignore: options.skipReason !== undefined,
      sanitizeResources: false,
      fn: async () => {
        await using target = await make();
        await fn(target);
      },
    });

  test("writeFile() creates the file with its mode and owner; readFile() reads it back", async (t) => {
    using d = (await t.files.openDir(t.dir))!;
    await d.writeFile("creds", "secret\n", { mode: 0o600, uid: 1000, gid: 1000 });
    assert.equal(await d.readFile("creds", { maxBytes: 100 }), "secret\n");
    const e = await d.entry("creds");
    assert.deepEqual([e?.kind, e?.mode, e?.uid, e?.gid, e?.nlink], ["file", 0o600, 1000, 1000, 1]);
    await d.writeFile("creds", "again", { mode: 0o644 });
    assert.equal(await d.readFile("creds", { maxBytes: 100 }), "again");
    assert.deepEqual(await t.files.readDir(t.dir), ["creds"], "no temporary file is left");
    assert.equal(await d.readFile("missing", { maxBytes: 10 }), undefined);
    assert.equal(await d.entry("missing"), undefined);
  });

  test("readFile() is bounded: the first or the last bytes only", async (t) => {
    await t.writeRaw(`${t.dir}/big`, `${"a".repeat(100_000)}END`);
    using d = (await t.files.openDir(t.dir))!;
    assert.equal((await d.readFile("big", { maxBytes: 10 }))!.length, 10);
    assert.equal(await d.readFile("big", { maxBytes: 5, tail: true }), "aaEND");
  });

  test("readFile() refuses a symbolic link, a FIFO, a hard link and a directory", async (t) => {
    await t.symlink("/etc/hostname", `${t.dir}/link`);
    await t.fifo(`${t.dir}/fifo`);
    await t.writeRaw(`${t.dir}/orig`, "x");
    await t.hardlink(`${t.dir}/orig`, `${t.dir}/hard`);
    await t.files.mkdir(`${t.dir}/sub`);
    using d = (await t.files.openDir(t.dir))!;
    for (const n of ["link", "fifo", "hard", "orig", "sub"]) {
      await assert.rejects(d.readFile(n, { maxBytes: 10 }), unsafe, n);
    }
    assert.equal((await d.entry("link"))?.kind, "symlink");
    assert.equal((await d.entry("fifo"))?.kind, "fifo");
  });

  test("writeFile() replaces a planted symbolic link instead of following it", async (t) => {
    await t.writeRaw(`${t.dir}/victim`, "untouched");
    await t.symlink(`${t.dir}/victim`, `${t.dir}/creds`);
    using d = (await t.files.openDir(t.dir))!;
    await d.writeFile("creds", "ours", { mode: 0o600 });
    assert.equal((await d.entry("creds"))?.kind, "file");
    assert.equal(await d.readFile("creds", { maxBytes: 10 }), "ours");
    assert.equal(await d.readFile("victim", { maxBytes: 20 }), "untouched");
    await t.files.mkdir(`${t.dir}/adir`);
    await assert.rejects(d.writeFile("adir", "x"), unsafe);
  });

  test("remove() takes a link away, not its target; directories only when asked and empty", async (t) => {
    await t.writeRaw(`${t.dir}/victim`, "untouched");
    await t.symlink(`${t.dir}/victim`, `${t.dir}/link`);
    await t.files.mkdir(`${t.dir}/sub`);
    await t.writeRaw(`${t.dir}/sub/f`, "x");
    using d = (await t.files.openDir(t.dir))!;
    assert.equal(await d.remove("link"), true);
    assert.equal(await d.remove("link"), false);
    assert.equal(await d.readFile("victim", { maxBytes: 20 }), "untouched");
    await assert.rejects(d.remove("sub"));
    await assert.rejects(d.remove("sub", { directory: true }));
    using sub = (await d.subdir("sub"))!;
    assert.equal(await sub.remove("f"), true);
    assert.equal(await d.remove("sub", { directory: true }), true);
  });

  test("subdir() creates or opens a directory and refuses a link or a file in its place", async (t) => {
    await t.symlink("/tmp", `${t.dir}/linked`);
    await t.writeRaw(`${t.dir}/file`, "x");
    using d = (await t.files.openDir(t.dir))!;
    assert.equal(await d.subdir("absent"), undefined);
    using created = (await d.subdir("creds", { create: { mode: 0o700 } }))!;
    await created.setOwner(1000, 1000, 0o700);
    const e = await d.entry("creds");
    assert.deepEqual([e?.kind, e?.mode, e?.uid], ["directory", 0o700, 1000]);
    await created.writeFile("k", "v");
    assert.equal(await created.readFile("k", { maxBytes: 5 }), "v");
    await assert.rejects(d.subdir("linked", { create: { mode: 0o700 } }), unsafe);
    await assert.rejects(d.subdir("file"), unsafe);
  });

  test("openDir() refuses a link or a file; names must be single components", async (t) => {
    await t.symlink("/tmp", `${t.dir}/linked`);
    await t.writeRaw(`${t.dir}/file`, "x");
    await assert.rejects(t.files.openDir(`${t.dir}/linked`), unsafe);
    await assert.rejects(t.files.openDir(`${t.dir}/file`), unsafe);
    assert.equal(await t.files.openDir(`${t.dir}/absent`), undefined);
    using d = (await t.files.openDir(t.dir))!;
    for (const bad of ["", ".", "..", "a/b", "../x"]) {
      await assert.rejects(d.readFile(bad, { maxBytes: 1 }), TypeError, JSON.stringify(bad));
    }
  });

  test("socketPath() refuses anything but a socket and is undefined when absent", async (t) => {
    await t.symlink("/run/anything.sock", `${t.dir}/link.sock`);
    await t.writeRaw(`${t.dir}/file.sock`, "x");
    using d = (await t.files.openDir(t.dir))!;
    assert.equal(await d.socketPath("absent.sock"), undefined);
    await assert.rejects(d.socketPath("link.sock"), unsafe);
    await assert.rejects(d.socketPath("file.sock"), unsafe);
  });
}
