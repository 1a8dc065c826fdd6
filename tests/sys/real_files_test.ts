/**
 * The shared {@link Files.openDir} contract against the real kernel (root: files are given to uid
 * 1000), plus what only the kernel can show: a FIFO is refused without blocking, a directory on a
 * FUSE mount is refused, and a socket reached through `socketPath()` accepts connections.
 */
import assert from "node:assert/strict";
import { filesContract } from "../../src/sys/files_contract.ts";
import { RealFiles, UnsafeEntryError } from "../../src/sys/files.ts";
import { connectUnix, listenUnix } from "../../src/sys/unix_socket.ts";
import {
  privilegedTest,
  rcloneSkipReason,
  rootSkipReason,
  startRclone,
  tempDir,
} from "../testbed/harness/sys_helpers.ts";

async function run(cmd: string, ...args: string[]): Promise<void> {
  const r = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  if (!r.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
  }
}

filesContract("RealFiles", async () => {
  const dir = await tempDir("files");
  const path = `${dir.path}/comm`;
  await Deno.mkdir(path);
  return {
    files: new RealFiles(),
    dir: path,
    writeRaw: (p, data) => Deno.writeTextFile(p, data),
    symlink: (target, p) => Deno.symlink(target, p),
    fifo: (p) => run("mkfifo", p),
    hardlink: (existing, p) => Deno.link(existing, p),
    [Symbol.asyncDispose]: () => dir[Symbol.asyncDispose](),
  };
}, { skipReason: rootSkipReason() });

privilegedTest(
  "RealFiles: a FIFO is refused at once, never opened for reading",
  rootSkipReason(),
  async () => {
    await using dir = await tempDir("fifo");
    await run("mkfifo", `${dir.path}/mount.error`);
    using d = (await new RealFiles().openDir(dir.path))!;
    // A blocking open would never return: no writer ever opens this FIFO.
    await assert.rejects(d.readFile("mount.error", { maxBytes: 4096 }), UnsafeEntryError);
  },
);

privilegedTest(
  "RealFiles: socketPath() reaches the socket through its descriptor",
  rootSkipReason(),
  async () => {
    await using dir = await tempDir("sock");
    using listener = await listenUnix(`${dir.path}/mount.sock`, { mode: 0o600 });
    using d = (await new RealFiles().openDir(dir.path))!;
    using via = (await d.socketPath("mount.sock"))!;
    assert.match(via.path, /^\/proc\/self\/fd\/\d+$/);
    using conn = await connectUnix(via.path, { timeoutMs: 2000 });
    assert.ok(conn);
    assert.equal(listener.path, `${dir.path}/mount.sock`);
  },
);

privilegedTest(
  "RealFiles: a directory on a FUSE mount is refused (it could block)",
  rcloneSkipReason(),
  async () => {
    await using dir = await tempDir("fuse");
    await Deno.mkdir(`${dir.path}/data`);
    await Deno.mkdir(`${dir.path}/mnt`);
    await using _engine = startRclone(`${dir.path}/data`, `${dir.path}/mnt`);
    for (let i = 0; i < 100; i++) {
      if ((await Deno.stat(`${dir.path}/mnt`)).dev !== (await Deno.stat(dir.path)).dev) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await assert.rejects(new RealFiles().openDir(`${dir.path}/mnt`), /FUSE/);
  },
);
