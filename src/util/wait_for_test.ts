import assert from "node:assert/strict";
import FakeTimers from "@sinonjs/fake-timers";
import { waitFor } from "./wait_for.ts";
import { TimeoutError } from "./errors.ts";

Deno.test("waitFor() returns the first truthy value", async () => {
  const values: unknown[] = [undefined, null, false, 0, "", "found"];
  assert.equal(await waitFor("a value", () => values.shift(), { intervalMs: 0 }), "found");
});

Deno.test("waitFor() throws a TimeoutError naming what it waited for", async () => {
  const clock = FakeTimers.withGlobal(globalThis).install({
    toFake: ["setTimeout", "performance"],
  });
  try {
    const caught = waitFor("the moon", () => false, { timeoutMs: 100, intervalMs: 30 })
      .catch((e) => e);
    await clock.tickAsync(200);
    const err = await caught;
    assert.ok(err instanceof TimeoutError);
    assert.equal(err.what, "the moon");
    assert.match(err.message, /100 ms waiting for the moon/);
  } finally {
    clock.uninstall();
  }
});

Deno.test("waitFor() stops with the signal's reason when aborted", async () => {
  const ac = new AbortController();
  const p = waitFor("never", () => false, { intervalMs: 10_000, signal: ac.signal });
  ac.abort(new Error("stop"));
  await assert.rejects(p, /stop/);
});
