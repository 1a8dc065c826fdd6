import assert from "node:assert/strict";
import { PendingError, SkippedError, StepReporter } from "./step_reporter.ts";
import { parseEnvLines } from "./s3_server.ts";

Deno.test("steps print ✓, pending with the issue, and ✗; ok only without failures", async () => {
  let out = "";
  const r = new StepReporter((t) => out += t);
  assert.equal(await r.step("a", () => Promise.resolve(1), (v) => `v=${v}`), 1);
  await r.step("b", () => Promise.reject(new PendingError(6, "not yet")));
  assert.equal(
    await r.step("s", () => Promise.reject(new SkippedError("no S3 feature"))),
    undefined,
  );
  assert.equal(r.ok, true);
  await r.step("c", () => Promise.reject(new Error("boom")));
  assert.equal(r.ok, false);
  assert.match(out, /✓ a: v=1 \(\d+\.\d s\)/);
  assert.match(out, /… pending b: \(issue #6\) not yet/);
  assert.match(out, /• s: skipped: no S3 feature/);
  assert.match(out, /✗ c: boom/);
  assert.deepEqual(r.counts(), { ok: 1, pending: 1, failed: 1, info: 1 });
});

Deno.test("env lines of the S3 scripts", () => {
  assert.deepEqual(parseEnvLines("# c\nS3_ENDPOINT=http://x:1\nA=b=c\n\n"), {
    S3_ENDPOINT: "http://x:1",
    A: "b=c",
  });
});
