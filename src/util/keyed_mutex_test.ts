import assert from "node:assert/strict";
import { KeyedMutex } from "./keyed_mutex.ts";

const tick = () => new Promise((r) => setTimeout(r, 1));

Deno.test("KeyedMutex serialises one key in arrival order", async () => {
  const m = new KeyedMutex();
  const order: string[] = [];
  const job = (name: string) =>
    m.run("a", async () => {
      order.push(`${name}+`);
      await tick();
      order.push(`${name}-`);
    });
  await Promise.all([job("1"), job("2"), job("3")]);
  assert.deepEqual(order, ["1+", "1-", "2+", "2-", "3+", "3-"]);
  assert.equal(m.size, 0);
});

Deno.test("KeyedMutex lets different keys run concurrently", async () => {
  const m = new KeyedMutex();
  const order: string[] = [];
  const job = (key: string) =>
    m.run(key, async () => {
      order.push(`${key}+`);
      await tick();
      order.push(`${key}-`);
    });
  await Promise.all([job("a"), job("b")]);
  assert.deepEqual(order, ["a+", "b+", "a-", "b-"]);
});

Deno.test("KeyedMutex releases on error and ignores a double release", async () => {
  const m = new KeyedMutex();
  await assert.rejects(m.run("k", () => Promise.reject(new Error("boom"))), /boom/);
  assert.equal(m.isLocked("k"), false);
  const release = await m.acquire("k");
  release();
  release();
  assert.equal(await m.run("k", () => 7), 7);
  assert.equal(m.size, 0);
});

Deno.test("KeyedMutex: a waiter whose signal aborts leaves the queue without blocking the others", async () => {
  const m = new KeyedMutex();
  const order: string[] = [];
  let releaseFirst!: () => void;
  const first = m.run(
    "k",
    () => new Promise<void>((r) => (releaseFirst = r)).then(() => order.push("1")),
  );
  const ac = new AbortController();
  const second = m.run("k", () => order.push("2"), ac.signal);
  const third = m.run("k", () => order.push("3"));
  const reason = new Error("deadline");
  ac.abort(reason);
  await assert.rejects(second, (e) => e === reason);
  releaseFirst();
  await Promise.all([first, third]);
  assert.deepEqual(order, ["1", "3"]);
  assert.equal(m.size, 0);
  await assert.rejects(m.run("k", () => 1, ac.signal), (e) => e === reason);
  assert.equal(m.size, 0);
});
