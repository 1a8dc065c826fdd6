import assert from "node:assert/strict";
import { WorkQueue } from "./work_queue.ts";

Deno.test("WorkQueue processes each key once even when added repeatedly", async () => {
  const seen: string[] = [];
  const q = new WorkQueue({ workers: 2, process: (k) => (seen.push(k), Promise.resolve()) });
  const ctl = new AbortController();
  const running = q.run(ctl.signal);
  q.add("a");
  q.add("a");
  q.add("b");
  await q.idle();
  assert.deepEqual(seen.sort(), ["a", "b"]);
  ctl.abort();
  await running;
});

Deno.test("WorkQueue never runs one key concurrently and re-runs a key added while it ran", async () => {
  let active = 0;
  let maxActive = 0;
  let runs = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const q = new WorkQueue({
    workers: 4,
    process: async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      runs++;
      if (runs === 1) await gate;
      active--;
    },
  });
  const ctl = new AbortController();
  const running = q.run(ctl.signal);
  q.add("k");
  await new Promise((r) => setTimeout(r, 5));
  q.add("k");
  q.add("k");
  release();
  await q.idle();
  assert.equal(maxActive, 1);
  assert.equal(runs, 2);
  ctl.abort();
  await running;
});

Deno.test("WorkQueue retries failures with growing back-off, then succeeds", async () => {
  const times: number[] = [];
  const q = new WorkQueue({
    workers: 1,
    baseDelayMs: 10,
    process: () => {
      times.push(performance.now());
      if (times.length < 4) throw new Error("transient");
      return Promise.resolve();
    },
  });
  const ctl = new AbortController();
  const running = q.run(ctl.signal);
  q.add("x");
  await q.idle();
  assert.equal(times.length, 4);
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  assert.ok(gaps[0]! >= 9 && gaps[1]! >= 19 && gaps[2]! >= 39, `back-off gaps ${gaps}`);
  ctl.abort();
  await running;
});

Deno.test("WorkQueue honours requeueAfterMs and stops on abort", async () => {
  let runs = 0;
  const q = new WorkQueue({
    workers: 1,
    process: () => Promise.resolve(++runs < 3 ? { requeueAfterMs: 5 } : {}),
  });
  const ctl = new AbortController();
  const running = q.run(ctl.signal);
  q.add("y");
  await q.idle();
  assert.equal(runs, 3);
  ctl.abort();
  await running;
  q.add("z");
  assert.equal(q.length, 0, "a stopped queue takes no work");
});
