import assert from "node:assert/strict";
import { kubeTime, microTime } from "./time.ts";

Deno.test("kubeTime() is RFC 3339 in whole seconds, microTime() has six fractional digits", () => {
  const at = Date.UTC(2026, 10, 26, 3, 32, 19, 123);
  assert.equal(kubeTime(at), "2026-11-26T03:32:19Z");
  assert.equal(kubeTime(new Date(at)), "2026-11-26T03:32:19Z");
  assert.equal(microTime(at), "2026-11-26T03:32:19.123000Z");
  assert.match(kubeTime(), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
});
