import assert from "node:assert/strict";
import { ReceiveBudget, ReceiveFlow } from "./receive_budget.ts";

const W = 65_535;
const flow = (budget: ReceiveBudget, limit: number) =>
  new ReceiveFlow(budget, { limit, initialWindow: W, target: W });

Deno.test("receive flow: DATA within the window is counted; beyond it (or NaN) is refused", () => {
  const f = flow(new ReceiveBudget(1_000_000), 500_000);
  assert.equal(f.receive(60_000), true);
  assert.equal(f.window, W - 60_000);
  assert.equal(f.receive(W - 60_000 + 1), false, "one byte beyond the window");
  assert.equal(f.receive(Number.NaN), false);
  assert.equal(f.window, W - 60_000, "a refused frame changes nothing");
  assert.equal(f.receive(W - 60_000), true, "exactly the window");
  assert.equal(f.window, 0);
});

Deno.test("receive flow: the window reopens only while held bytes + window fit the connection's limit", () => {
  const budget = new ReceiveBudget(10_000_000);
  const f = flow(budget, 200_000);
  let sent = 0;
  // A peer that sends everything it is granted, all of it held (a body that never ends).
  for (;;) {
    const n = f.window;
    if (n === 0) break;
    assert.ok(f.receive(n));
    f.hold(n);
    sent += n;
    f.grant();
  }
  assert.ok(f.held + f.window <= 200_000, `held ${f.held} + window ${f.window}`);
  assert.equal(sent, f.held);
  assert.ok(sent > 200_000 - 1024 - W, `stalls close to the limit (${sent})`);
  assert.equal(f.grant(), 0, "no reopening while full");
  assert.equal(budget.used, f.held, "the server's budget counts the same bytes");
  // The stream's handler returns: its bytes are given back and the window reopens.
  f.release(f.held);
  assert.equal(budget.used, 0);
  assert.equal(f.grant(), W);
  assert.equal(f.window, W);
});

Deno.test("receive flow: the server's budget bounds all connections together, and wakes waiters", () => {
  const budget = new ReceiveBudget(150_000);
  const a = flow(budget, 1_000_000);
  const b = flow(budget, 1_000_000);
  const fill = (f: ReceiveFlow) => {
    for (;;) {
      const n = f.window;
      if (n === 0 || !f.receive(n)) return;
      f.hold(n);
      if (f.grant() === 0) return;
    }
  };
  fill(a);
  fill(b);
  // Each connection may have pushed one window past the room it saw (windows are not reserved).
  assert.ok(budget.used <= 150_000 + 2 * W, `budget used ${budget.used}`);
  assert.equal(a.grant(), 0);
  assert.equal(b.grant(), 0);
  let woken = 0;
  budget.onRelease(() => woken++);
  const cancel = budget.onRelease(() => woken += 100);
  cancel();
  assert.equal(budget.waiting, 1);
  a.release(a.held);
  assert.equal(woken, 1, "the waiter ran once, the cancelled one never");
  assert.equal(budget.waiting, 0);
  assert.ok(b.grant() > 0, "b reopens its window with the room a freed");
});

Deno.test("receive flow: header lists are held only when they fit; tiny reopenings are not sent", () => {
  const budget = new ReceiveBudget(100_000);
  const f = flow(budget, 80_000);
  assert.equal(f.tryHold(10_000), true);
  assert.equal(f.tryHold(80_000 - W - 10_000 + 1), false, "over the connection's limit");
  assert.equal(f.tryHold(Number.NaN), false);
  assert.equal(f.held, 10_000);
  // The window is nearly full and the limit leaves less than 1 KiB to reopen: nothing is sent.
  assert.ok(f.receive(2000));
  assert.equal(f.tryHold(80_000 - W - 10_000 + 2000 - 500), true);
  assert.equal(f.grant(), 0, "500 bytes would be a silly window update");
  const other = flow(budget, 80_000);
  assert.equal(other.tryHold(budget.room + 1), false, "over the server's budget");
});

Deno.test("receive flow: limits that are not integers, or too small for the window, are refused", () => {
  assert.throws(() => new ReceiveBudget(Number.NaN), RangeError);
  assert.throws(() => new ReceiveBudget(0), RangeError);
  const budget = new ReceiveBudget(1000);
  assert.throws(() => flow(budget, Number.NaN), RangeError);
  assert.throws(() => flow(budget, W - 1), RangeError);
  assert.throws(
    () => new ReceiveFlow(budget, { limit: W, initialWindow: W, target: Infinity }),
    RangeError,
  );
});
