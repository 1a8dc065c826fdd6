import assert from "node:assert/strict";
import FakeTimers from "@sinonjs/fake-timers";
import type { CallOptions, KubeClient, KubeObject } from "./client.ts";
import { FakeKubeClient } from "./fake_client.ts";
import { leaderElectionProblem, LeaderElector } from "./leader_election.ts";
import { LEASES } from "./resources.ts";
import type { Lease } from "./types.ts";
import { aborted } from "../util/sleep.ts";

const TIMING = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** A manual monotonic clock. */
function clock(start = 1_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

function elector(
  client: KubeClient,
  identity: string,
  now: () => number,
  wallClock: () => number = () => Date.parse("2030-01-01T00:00:00Z"),
) {
  return new LeaderElector({
    client,
    namespace: "kube-system",
    name: "lease",
    identity,
    ...TIMING,
    now,
    wallClock,
    onStartedLeading: () => Promise.resolve(),
  });
}

/**
 * A real-time elector (short timings) whose work runs until told to stop; `started` resolves once
 * it leads, `work()` is the signal its work got.
 */
function leadingElector(client: KubeClient) {
  let workSignal: AbortSignal | undefined;
  let leading!: () => void;
  const started = new Promise<void>((r) => (leading = r));
  const e = new LeaderElector({
    client,
    namespace: "n",
    name: "l",
    identity: "a",
    leaseDurationMs: 600,
    renewDeadlineMs: 400,
    retryPeriodMs: 50,
    onStartedLeading: async (signal) => {
      workSignal = signal;
      leading();
      await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
    },
  });
  return { e, started, work: () => workSignal };
}

async function holder(client: KubeClient): Promise<string | undefined> {
  return (await client.get<Lease>(LEASES, "lease", "kube-system"))?.spec.holderIdentity;
}

Deno.test("leader election: the first candidate creates the lease; the other waits", async () => {
  const client = new FakeKubeClient();
  const c = clock();
  const a = elector(client, "a", c.now);
  const b = elector(client, "b", c.now);
  assert.equal(await a.tryAcquireOrRenew(), true);
  assert.equal(await b.tryAcquireOrRenew(), false);
  assert.equal(await holder(client), "a");
  assert.equal(a.isLeader, true);
  assert.equal(b.isLeader, false);
});

Deno.test("leader election: expiry is judged by local monotonic time since the record last changed, never by the remote renewTime", async (t) => {
  for (
    const [name, remoteRenew] of [
      ["holder's clock far behind (renewTime a year ago)", "2029-01-01T00:00:00.000000Z"],
      ["holder's clock far ahead (renewTime next year)", "2031-01-01T00:00:00.000000Z"],
    ] as const
  ) {
    await t.step(name, async () => {
      const client = new FakeKubeClient();
      await client.create<Lease>(LEASES, {
        metadata: { name: "lease", namespace: "kube-system" },
        spec: {
          holderIdentity: "a",
          leaseDurationSeconds: 15,
          acquireTime: remoteRenew,
          renewTime: remoteRenew,
          leaseTransitions: 0,
        },
      });
      const c = clock();
      const b = elector(client, "b", c.now);
      assert.equal(await b.tryAcquireOrRenew(), false, "first sight: the lease counts as held");
      c.advance(14_999);
      assert.equal(await b.tryAcquireOrRenew(), false, "unchanged for less than 15 s: held");
      c.advance(2);
      assert.equal(await b.tryAcquireOrRenew(), true, "unchanged for 15 s: expired, taken");
      assert.equal(await holder(client), "b");
      const lease = (await client.get<Lease>(LEASES, "lease", "kube-system"))!;
      assert.equal(lease.spec.leaseTransitions, 1);
    });
  }
});

Deno.test("leader election: every change of the record restarts the observer's expiry", async () => {
  const client = new FakeKubeClient();
  const ca = clock();
  const cb = clock(50_000);
  const a = elector(client, "a", ca.now);
  const b = elector(client, "b", cb.now);
  assert.equal(await a.tryAcquireOrRenew(), true);
  assert.equal(await b.tryAcquireOrRenew(), false);
  for (let i = 0; i < 5; i++) {
    cb.advance(10_000);
    ca.advance(2_000);
    // a renews (a write: the record changes)
    assert.equal(await a.tryAcquireOrRenew(), true);
    assert.equal(await b.tryAcquireOrRenew(), false, `renewal ${i}: b saw a change`);
  }
});

Deno.test("leader election: a released lease (empty holder) is taken at once", async () => {
  const client = new FakeKubeClient();
  await client.create<Lease>(LEASES, {
    metadata: { name: "lease", namespace: "kube-system" },
    spec: { holderIdentity: "", leaseDurationSeconds: 1, leaseTransitions: 3 },
  });
  const b = elector(client, "b", clock().now);
  assert.equal(await b.tryAcquireOrRenew(), true);
  assert.equal(await holder(client), "b");
});

Deno.test("leader election: the leader's validity ends renewDeadline after it sent its last renewal", async () => {
  const client = new FakeKubeClient();
  const c = clock();
  const a = elector(client, "a", c.now);
  assert.equal(await a.tryAcquireOrRenew(), true);
  assert.equal(a.remainingMs(), 10_000);
  c.advance(9_999);
  assert.equal(a.isLeader, true);
  c.advance(1);
  assert.equal(a.isLeader, false);
  assert.equal(a.remainingMs(), 0);
  assert.equal(await a.tryAcquireOrRenew(), false, "an expired leader does not renew");
});

Deno.test("leader election: a leader that finds another holder (stale copy → 409) does not win", async () => {
  const client = new FakeKubeClient();
  const c = clock();
  const a = elector(client, "a", c.now);
  assert.equal(await a.tryAcquireOrRenew(), true);
  // Someone else takes the lease behind a's back (as after a's long pause).
  const lease = (await client.get<Lease>(LEASES, "lease", "kube-system"))!;
  await client.update<Lease>(LEASES, { ...lease, spec: { ...lease.spec, holderIdentity: "b" } });
  c.advance(2_000);
  assert.equal(await a.tryAcquireOrRenew(), false);
  assert.equal(await holder(client), "b");
});

Deno.test("leader election: timing settings are checked like client-go's", () => {
  assert.equal(leaderElectionProblem(TIMING), undefined);
  assert.match(
    leaderElectionProblem({ ...TIMING, renewDeadlineMs: 15_000 })!,
    /lease duration .* must be greater than the renew deadline/,
  );
  assert.match(
    leaderElectionProblem({ ...TIMING, retryPeriodMs: 9_000 })!,
    /renew deadline .* must be greater than 1.2 × the retry period/,
  );
  assert.throws(
    () =>
      new LeaderElector({
        client: new FakeKubeClient(),
        namespace: "n",
        name: "l",
        identity: "a",
        leaseDurationMs: 1000,
        renewDeadlineMs: 2000,
        retryPeriodMs: 100,
        onStartedLeading: () => Promise.resolve(),
      }),
    RangeError,
  );
});

/** A client whose lease updates hang (until the call's signal aborts) once `hang` is set. */
class HangingClient extends FakeKubeClient {
  hang = false;
  hungCalls = 0;
  override update<T extends KubeObject>(
    r: Parameters<FakeKubeClient["update"]>[0],
    obj: T,
    opts: CallOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    if (!this.hang) return super.update(r, obj);
    this.hungCalls++;
    return new Promise((_, reject) => {
      opts.signal?.addEventListener("abort", () => reject(opts.signal!.reason), { once: true });
    });
  }
}

Deno.test("leader election: a leader whose renewals hang steps down, and its work is told to stop", async () => {
  const client = new HangingClient();
  const { e, started, work } = leadingElector(client);
  const stop = new AbortController();
  const outcome = e.run(stop.signal);
  await started;
  client.hang = true;
  assert.equal(await outcome, "lost");
  assert.equal(work()?.aborted, true);
  assert.equal(e.isLeader, false);
  assert.ok(client.hungCalls >= 1, "renewals were attempted and hung");
  stop.abort();
});

Deno.test("leader election: stopping releases the lease so a successor need not wait", async () => {
  const client = new FakeKubeClient();
  const { e, started } = leadingElector(client);
  const stop = new AbortController();
  const outcome = e.run(stop.signal);
  await started;
  stop.abort();
  assert.equal(await outcome, "stopped");
  const lease = (await client.get<Lease>(LEASES, "l", "n"))!;
  assert.equal(lease.spec.holderIdentity, "");
});

/** A client whose lease updates never return once `hang` is set: they ignore their deadline. */
class DeafClient extends FakeKubeClient {
  hang = false;
  hungCalls = 0;
  override update<T extends KubeObject>(
    r: Parameters<FakeKubeClient["update"]>[0],
    obj: T,
    _opts: CallOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    if (!this.hang) return super.update(r, obj);
    this.hungCalls++;
    return new Promise(() => {});
  }
}

Deno.test("leader election: a renewal that never returns still steps down at validFrom + renewDeadline (fake timers)", async () => {
  const clock = FakeTimers.withGlobal(globalThis).install({
    toFake: ["setTimeout", "clearTimeout"],
  });
  try {
    const client = new DeafClient();
    let work: AbortSignal | undefined;
    let stoppedAt: number | undefined;
    const e = new LeaderElector({
      client,
      namespace: "kube-system",
      name: "lease",
      identity: "a",
      ...TIMING,
      now: () => clock.now,
      onStartedLeading: async (signal) => {
        work = signal;
        await aborted(signal);
        stoppedAt = clock.now;
      },
    });
    const stop = new AbortController();
    let outcome: string | undefined;
    const running = e.run(stop.signal).then((o) => (outcome = o));
    await clock.tickAsync(0);
    assert.ok(work && e.isLeader, "leading");
    const validFrom = clock.now; // the acquisition was sent at once
    client.hang = true; // from now on every renewal hangs, deaf to its deadline
    await clock.tickAsync(TIMING.renewDeadlineMs - 1);
    assert.ok(client.hungCalls >= 1, "a renewal is in flight and hangs");
    assert.equal(work!.aborted, false, "still valid 1 ms before the deadline");
    assert.equal(e.remainingMs(), 1);
    await clock.tickAsync(1);
    assert.equal(work!.aborted, true, "the work is told to stop at validFrom + renewDeadline");
    assert.equal(e.isLeader, false, "the write fence is closed");
    await clock.tickAsync(0);
    assert.equal(stoppedAt, validFrom + TIMING.renewDeadlineMs);
    assert.equal(outcome, "lost", "run() ends although the renewal never returned");
    // deno-lint-ignore no-console
    console.log(
      `stepped down at validFrom + ${
        stoppedAt! - validFrom
      } ms (renewDeadline ${TIMING.renewDeadlineMs} ms) with ${client.hungCalls} renewal(s) still hanging`,
    );
    stop.abort();
    await running;
  } finally {
    clock.uninstall();
  }
});

Deno.test("leader election: a renewal that lands after the step-down does not make the candidate leader again", async () => {
  const clock = FakeTimers.withGlobal(globalThis).install({
    toFake: ["setTimeout", "clearTimeout"],
  });
  try {
    let release: (() => void) | undefined;
    const client = new (class extends FakeKubeClient {
      late = false;
      override update<T extends KubeObject>(
        r: Parameters<FakeKubeClient["update"]>[0],
        obj: T,
        _opts: CallOptions & { subresource?: "status" } = {},
      ): Promise<T> {
        if (!this.late) return super.update(r, obj);
        this.late = false;
        // Answers, successfully, only when told to: after the validity ended.
        return new Promise((resolve, reject) => {
          release = () => super.update(r, obj).then(resolve, reject);
        });
      }
    })();
    const e = new LeaderElector({
      client,
      namespace: "kube-system",
      name: "lease",
      identity: "a",
      ...TIMING,
      now: () => clock.now,
      onStartedLeading: (signal) => aborted(signal),
    });
    const stop = new AbortController();
    const running = e.run(stop.signal);
    await clock.tickAsync(0);
    assert.equal(e.isLeader, true);
    client.late = true;
    await clock.tickAsync(TIMING.renewDeadlineMs);
    assert.equal(e.isLeader, false);
    assert.equal(await running, "lost");
    release!();
    await clock.tickAsync(0);
    assert.equal(e.isLeader, false, "the late answer counts for nothing");
    assert.equal(e.remainingMs(), 0);
  } finally {
    clock.uninstall();
  }
});
