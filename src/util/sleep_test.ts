import assert from "node:assert/strict";
import { aborted, pause, sleep } from "./sleep.ts";

Deno.test("sleep() rejects with the signal's reason on abort, also when already aborted", async () => {
  const ac = new AbortController();
  const s = sleep(60_000, ac.signal);
  ac.abort(new Error("cancelled"));
  await assert.rejects(s, /cancelled/);
  await assert.rejects(sleep(1, ac.signal), /cancelled/);
});

Deno.test("pause() resolves early on abort and never rejects", async () => {
  const ac = new AbortController();
  const p = pause(60_000, ac.signal);
  ac.abort(new Error("cancelled"));
  await p;
  await pause(60_000, ac.signal);
  await aborted(ac.signal);
});

Deno.test("sleep() and pause() resolve after their time without a signal", async () => {
  await sleep(1);
  await pause(1);
});
