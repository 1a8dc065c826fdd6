import assert from "node:assert/strict";
import { SysError } from "../sys/errno.ts";
import { FakeFiles } from "../sys/fake_files.ts";
import { HealthChecker } from "./health.ts";

Deno.test("HealthChecker: a stat answered from cache does not hide a dead FUSE server", async () => {
  const files = new FakeFiles();
  files.addDir("/mnt/t");
  const health = new HealthChecker(files, { timeoutMs: 1000 });
  assert.deepEqual(await health.check("/mnt/t"), { ok: true, state: "ok" });
  files.failStat("/mnt/t", new SysError(107, "open", { path: "/mnt/t" }));
  const dead = await health.check("/mnt/t");
  assert.match(dead.ok ? "" : dead.problem, /not connected/);
  assert.equal(dead.state, "dead");
  const missing = await health.check("/mnt/x");
  assert.match(missing.ok ? "" : missing.problem, /does not exist/);
});

Deno.test("HealthChecker: checks of a hung mount share one probe, then answer at once", async () => {
  const files = new FakeFiles();
  files.addDir("/src");
  files.addDir("/target-a");
  files.addDir("/target-b");
  files.hang("/src");
  files.hang("/target-a");
  files.hang("/target-b");
  const health = new HealthChecker(files, { timeoutMs: 30 });
  // Concurrent checks of one connection (key "0:42"): a single probe.
  const first = await Promise.all(
    Array.from({ length: 20 }, (_, i) => health.check(i % 2 ? "/target-a" : "/src", "0:42")),
  );
  assert.ok(first.every((r) => !r.ok && r.state === "hung" && /hung/.test(r.problem)));
  assert.equal(health.inFlight, 1);
  // After the timeout: answered without waiting (before any timer runs) and without a new probe.
  for (let i = 0; i < 50; i++) {
    const first = await Promise.race([
      health.check("/target-b", "0:42"),
      new Promise<"waited">((r) => setTimeout(() => r("waited"), 0)),
    ]);
    assert.notEqual(first, "waited");
    assert.equal(first !== "waited" && first.ok, false);
  }
  const probes = [...files.probes.values()].reduce((a, b) => a + b, 0);
  assert.equal(probes, 1, "one stat in flight for the connection, never more");
  assert.equal(health.inFlight, 1);
});

Deno.test("HealthChecker: the cap on probes in flight holds across mounts", async () => {
  const files = new FakeFiles();
  for (let i = 0; i < 5; i++) {
    files.addDir(`/m${i}`);
    files.hang(`/m${i}`);
  }
  const health = new HealthChecker(files, { timeoutMs: 10, maxInFlight: 3 });
  const results = await Promise.all([0, 1, 2, 3, 4].map((i) => health.check(`/m${i}`)));
  assert.equal(health.inFlight, 3);
  assert.match(results[4]!.ok ? "" : results[4]!.problem, /3 other mounts do not answer/);
  assert.equal(results[4]!.state, "unknown", "not checked is unknown, never a reason to unmount");
});

Deno.test("HealthChecker: a probe that ends frees its slot; the next check probes again", async () => {
  const files = new FakeFiles();
  files.addDir("/m");
  files.hang("/m");
  const health = new HealthChecker(files, { timeoutMs: 10 });
  assert.equal((await health.check("/m")).ok, false);
  assert.equal(health.inFlight, 1);
  files.hang("/m", false); // the connection is aborted: the stuck stat fails with ENOTCONN
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(health.inFlight, 0);
  assert.deepEqual(await health.check("/m"), { ok: true, state: "ok" });
  assert.equal(files.probes.get("/m"), 3); // stat (stuck), then stat + open
});
