import assert from "node:assert/strict";
import { FakeFiles } from "./fake_files.ts";
import { filesContract } from "./files_contract.ts";

filesContract("FakeFiles", () => {
  const files = new FakeFiles();
  const dir = "/test/dir";
  files.addDir(dir);
  return Promise.resolve({
    files,
    dir,
    writeRaw: (path, data) => files.writeFile(path, data, { mode: 0o644, uid: 1000, gid: 1000 }),
    symlink: (target, path) => Promise.resolve(files.plant(path, { kind: "symlink", target })),
    fifo: (path) => Promise.resolve(files.plant(path, { kind: "fifo" })),
    hardlink: (existing, path) => {
      const f = files.files.get(existing)!;
      f.nlink = (f.nlink ?? 1) + 1;
      files.files.set(path, f);
      return Promise.resolve();
    },
    [Symbol.asyncDispose]: () => Promise.resolve(),
  });
});

Deno.test("FakeFiles.hang() makes stat and touchDir never answer, and counts the probes", async () => {
  const files = new FakeFiles();
  files.addDir("/m");
  files.hang("/m");
  let answered = false;
  void files.stat("/m").then(() => (answered = true), () => (answered = true));
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(answered, false);
  assert.equal(files.probes.get("/m"), 1);
  files.hang("/m", false);
  await new Promise((r) => setTimeout(r, 0));
  await files.touchDir("/m");
  assert.equal(files.probes.get("/m"), 2);
});
