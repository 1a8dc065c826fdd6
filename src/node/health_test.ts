import assert from "node:assert/strict";
import { FakeFiles } from "../sys/fake_files.ts";
import { checkMountHealth } from "./health.ts";

const notConnected = () => Promise.reject(new Error("Transport endpoint is not connected"));

Deno.test("checkMountHealth: a stat answered from cache does not hide a dead FUSE server", async () => {
  const files = new FakeFiles();
  files.addDir("/mnt/t");
  assert.deepEqual(await checkMountHealth(files, "/mnt/t", 1000, () => Promise.resolve()), {
    ok: true,
  });
  const dead = await checkMountHealth(files, "/mnt/t", 1000, notConnected);
  assert.equal(dead.ok, false);
  assert.match(dead.ok ? "" : dead.problem, /not connected/);
});

Deno.test("checkMountHealth: a round trip that never answers is hung; missing is missing", async () => {
  const files = new FakeFiles();
  files.addDir("/mnt/t");
  const hung = await checkMountHealth(files, "/mnt/t", 20, () => new Promise(() => {}));
  assert.match(hung.ok ? "" : hung.problem, /did not answer within 20 ms/);
  const missing = await checkMountHealth(files, "/mnt/x", 20, notConnected);
  assert.match(missing.ok ? "" : missing.problem, /does not exist/);
  // Fakes get no real round trip by default.
  assert.deepEqual(await checkMountHealth(files, "/mnt/t", 20), { ok: true });
});
