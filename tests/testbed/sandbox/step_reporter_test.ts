import assert from "node:assert/strict";
import { SkippedError, StepReporter } from "./step_reporter.ts";
import { describeCrashes } from "./child_process.ts";
import { parseEnvLines } from "./s3_server.ts";

Deno.test("steps print ✓, ○ skipped with the reason, and ✗; ok only without failures", async () => {
  let out = "";
  const r = new StepReporter((t) => out += t);
  assert.equal(await r.step("a", () => Promise.resolve(1), (v) => `v=${v}`), 1);
  assert.equal(
    await r.step("s", () => Promise.reject(new SkippedError("no S3 feature"))),
    undefined,
  );
  assert.equal(r.ok, true);
  assert.equal(r.exitCode(), 0);
  await r.step("c", () => Promise.reject(new Error("timed out after 3 s waiting for X")));
  assert.equal(r.ok, false);
  assert.match(out, /✓ a: v=1 \(\d+\.\d s\)/);
  assert.match(out, /○ skipped s: no S3 feature/);
  assert.match(out, /✗ c: timed out after 3 s waiting for X/);
  assert.deepEqual(r.counts(), { ok: 1, failed: 1, skipped: 1, info: 0 });
  assert.doesNotMatch(out, /pending/);
});

Deno.test("finish() prints the counts and repeats each failure and skip; exit 1 on a failure", async () => {
  let out = "";
  const r = new StepReporter((t) => out += t);
  await r.step("fine", () => Promise.resolve(""));
  await r.step("skip me", () => Promise.reject(new SkippedError("fake S3")));
  assert.equal(r.finish(1.25), 0);
  assert.match(out, /1 done, 1 skipped, 0 failed in 1\.3 s\n {2}SKIPPED: skip me: fake S3\n$/);
  out = "";
  await r.step("broken", () => Promise.reject(new Error("first line\nsecond line")));
  assert.equal(r.finish(2), 1);
  assert.match(out, /1 done, 1 skipped, 1 failed in 2\.0 s/);
  assert.match(out, /FAILED: broken: first line\n/);
});

Deno.test("a multi-line detail is printed indented under its step", () => {
  let out = "";
  const r = new StepReporter((t) => out += t);
  r.report("crashed", "failed", "node plugin exited\nlast line 1\nlast line 2");
  assert.equal(out, "  ✗ crashed: node plugin exited\n      last line 1\n      last line 2\n");
});

Deno.test("describeCrashes() names the process, how it ended and its last log lines", () => {
  const text = describeCrashes([{
    name: "node plugin node-1",
    pid: 42,
    code: 134,
    signal: "SIGABRT",
    at: new Date("2026-01-01T00:00:00Z"),
    logTail: "Assertion failed: stream->closed_next == NULL",
  }, {
    name: "controller",
    pid: 43,
    code: 1,
    signal: null,
    at: new Date("2026-01-01T00:00:01Z"),
    logTail: "",
  }]);
  assert.equal(
    text,
    "node plugin node-1 (pid 42) exited on SIGABRT at 2026-01-01T00:00:00.000Z; last log lines:\n" +
      "Assertion failed: stream->closed_next == NULL\n" +
      "controller (pid 43) exited with code 1 at 2026-01-01T00:00:01.000Z; last log lines:\n" +
      "(empty log)",
  );
});

Deno.test("env lines of the S3 scripts", () => {
  assert.deepEqual(parseEnvLines("# c\nS3_ENDPOINT=http://x:1\nA=b=c\n\n"), {
    S3_ENDPOINT: "http://x:1",
    A: "b=c",
  });
});

Deno.test("failOnSkip (--scenario): a skipped step fails the run, with the same summary", async () => {
  let out = "";
  const r = new StepReporter((t) => out += t);
  r.failOnSkip = true;
  await r.step("fine", () => Promise.resolve(""));
  await r.step("needs two nodes", () => Promise.reject(new SkippedError("one node")));
  assert.equal(r.finish(1), 1);
  assert.match(
    out,
    /1 done, 1 skipped, 0 failed in 1\.0 s\n {2}SKIPPED: needs two nodes: one node/,
  );
});
