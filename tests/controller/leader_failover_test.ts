/**
 * Two controller processes, each behind its own {@link ApiProxy}, while workloads keep arriving.
 * The leader is then taken out three ways:
 * - **hang**: its API connection freezes (requests held, responses stalled) — its renewals hang;
 * - **stop**: SIGSTOP, until the other has taken over, then SIGCONT;
 * - **kill**: SIGKILL.
 *
 * Each time the other process takes over and attaches the later workloads, and the proxies'
 * records (every forwarded request, timed by this test process) show that the two never acted at
 * once: every write of the old leader had been answered before the new leader's acquiring lease
 * write was even sent, and the new leader wrote nothing before its acquisition was answered. A
 * leader that comes back (thaw, SIGCONT) sends no write and exits 1. In the end every workload is
 * attached exactly once, to one Mountpoint Pod per node.
 *
 * Timings: lease 4 s, renew deadline 2 s, retry 0.5 s (the margin, 2 s, is lease − renew).
 *
 * @module
 */
import assert from "node:assert/strict";
import { LEASES, PODS } from "../../src/kube/resources.ts";
import type { Lease, Pod } from "../../src/kube/types.ts";
import { LEADER_LEASE_NAME } from "../../src/options/controller_options.ts";
import { ROOT, type Running, tempDir, waitFor } from "../_helpers.ts";
import { ApiProxy, isLease, isWrite, type ProxyRecord } from "./_api_proxy.ts";
import {
  clusterKinds,
  clusterTest,
  type TestCluster,
  testCluster,
} from "../testbed/harness/controller_cluster.ts";
import { type Fixture, fixture } from "./_fixture.ts";

const ELECTION = [
  "--leader-election-lease-duration=4s",
  "--leader-election-renew-deadline=2s",
  "--leader-election-retry-period=500ms",
];
const NODES = 3;

type Fault = "hang" | "stop" | "kill";

async function holder(c: TestCluster): Promise<string> {
  const l = await c.client.get<Lease>(LEASES, LEADER_LEASE_NAME, c.mpNamespace);
  return l?.spec.holderIdentity ?? "";
}

/** Workloads created one after another until stopped; all use PV "l". */
function workloadStream(f: Fixture) {
  const created: Pod[] = [];
  let stopped = false;
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      created.push(await f.workload(`w${i}`, "l", { node: `node-${i % NODES}` }));
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  return {
    created,
    async stop() {
      stopped = true;
      await done;
    },
  };
}

async function attachedUIDs(f: Fixture): Promise<Set<string>> {
  const out = new Set<string>();
  for (const a of await f.attachments()) {
    for (const list of Object.values(a.spec.mountpointS3PodAttachments)) {
      for (const w of list) out.add(w.workloadPodUID);
    }
  }
  return out;
}

function summary(name: string, records: readonly ProxyRecord[]): string {
  const writes = records.filter((r) => isWrite(r) && !isLease(r));
  return `${name}: ${records.length} requests, ${writes.length} writes besides the lease`;
}

async function keepLog(name: string, p: Running): Promise<void> {
  await Deno.mkdir(`${ROOT}dist/test-logs`, { recursive: true });
  await Deno.writeTextFile(`${ROOT}dist/test-logs/failover-${name}-${Date.now()}.log`, p.stderr());
}

/**
 * The evidence: `old`'s writes were all answered before `next` sent the lease write that made it
 * leader, and `next` wrote nothing (besides the lease) before that write was answered.
 */
function assertNoOverlap(
  oldName: string,
  old: readonly ProxyRecord[],
  nextName: string,
  next: readonly ProxyRecord[],
  nextIdentity: string,
): void {
  const acquire = next.find((r) =>
    isLease(r) && isWrite(r) && r.holder === nextIdentity && r.status !== undefined &&
    r.status < 300
  );
  assert.ok(acquire?.doneAt !== undefined, `${nextName} acquired the lease through its proxy`);
  const oldWrites = old.filter((r) => isWrite(r) && !isLease(r));
  const nextWrites = next.filter((r) => isWrite(r) && !isLease(r));
  assert.ok(oldWrites.length > 0, `${oldName} acted before the fault (the test needs it)`);
  assert.ok(nextWrites.length > 0, `${nextName} acted after taking over`);
  for (const w of oldWrites) {
    assert.ok(
      w.doneAt !== undefined && w.doneAt < acquire.sentAt,
      `${oldName} wrote ${w.method} ${w.path} (sent ${w.sentAt.toFixed(0)}, answered ${
        w.doneAt?.toFixed(0) ?? "never"
      }) while ${nextName} was acquiring the lease (sent ${acquire.sentAt.toFixed(0)})`,
    );
  }
  // The old leader's lease writes after the takeover may only have failed (409: not the holder).
  for (const w of old.filter((r) => isLease(r) && isWrite(r) && r.sentAt > acquire.sentAt)) {
    assert.ok((w.status ?? 0) >= 300, `${oldName} renewed the lease after the takeover`);
  }
  for (const w of nextWrites) {
    assert.ok(
      w.sentAt > acquire.doneAt!,
      `${nextName} wrote ${w.method} ${w.path} before its acquisition was answered`,
    );
  }
}

async function failover(kind: "emulator" | "real", fault: Fault): Promise<void> {
  await using c = await testCluster(kind);
  await using dir = await tempDir("s3csi-failover-");
  await using proxyA = await ApiProxy.start(c.kubeconfig, dir.path, "a");
  await using proxyB = await ApiProxy.start(c.kubeconfig, dir.path, "b");
  const f = fixture(c);
  await f.volume("l");
  const a = f.controller(ELECTION, { KUBECONFIG: proxyA.kubeconfigPath, POD_NAME: "ctrl-a" });
  let b: Running | undefined;
  let aStopped = false;
  const stream = workloadStream(f);
  try {
    // a leads first (b starts only once a holds the lease), then both run.
    const aIdentity = await waitFor("ctrl-a to lead", async () => {
      const h = await holder(c);
      return h.startsWith("ctrl-a_") && h;
    }, { timeoutMs: 60_000, intervalMs: 100 });
    b = f.controller(ELECTION, { KUBECONFIG: proxyB.kubeconfigPath, POD_NAME: "ctrl-b" });
    await waitFor(
      "ctrl-b to run and watch the lease",
      () => b!.stderr().includes("Starting controller"),
      { timeoutMs: 60_000 },
    );
    await waitFor("ctrl-a to attach workloads", async () => (await attachedUIDs(f)).size >= 3, {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    if (fault === "hang") proxyA.freeze();
    if (fault === "stop") a.child.kill("SIGSTOP");
    if (fault === "kill") {
      a.child.kill("SIGKILL");
      aStopped = true;
    }
    const bIdentity = await waitFor("ctrl-b to take over", async () => {
      const h = await holder(c);
      return h.startsWith("ctrl-b_") && h;
    }, { timeoutMs: 60_000, intervalMs: 100 });
    const before = (await attachedUIDs(f)).size;
    await waitFor(
      "ctrl-b to attach new workloads",
      async () => (await attachedUIDs(f)).size >= before + 3,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    if (fault === "hang") proxyA.thaw();
    if (fault === "stop") a.child.kill("SIGCONT");
    // The old leader comes back (it may still see workloads arrive): it must find it lost the
    // lease and exit 1 without writing. (stop() sends a harmless SIGCONT and waits for the exit.)
    const aExit = fault === "kill"
      ? Promise.resolve(undefined)
      : a.stop("SIGCONT" as Deno.Signal, 60_000).catch(() => -1);
    await aExit;
    await stream.stop();
    const all = stream.created.map((p) => p.metadata.uid!);
    await waitFor("every workload attached", async () => {
      const got = await attachedUIDs(f);
      return all.every((u) => got.has(u));
    }, { timeoutMs: 60_000, intervalMs: 200 });
    const attachments = await f.attachments();
    const entries = attachments.flatMap((s) =>
      Object.values(s.spec.mountpointS3PodAttachments).flat()
    );
    assert.equal(entries.length, all.length, "each workload attached exactly once");
    assert.equal(attachments.length, NODES, "one attachment per node");
    assert.equal(
      (await c.client.list<Pod>(PODS, { namespace: c.mpNamespace })).items.length,
      NODES,
      "one Mountpoint Pod per node",
    );
    assertNoOverlap("ctrl-a", proxyA.records, "ctrl-b", proxyB.records, bIdentity);
    assert.notEqual(aIdentity, bIdentity);
    if (fault !== "kill") {
      aStopped = true;
      await keepLog(`${fault}-a`, a);
      assert.equal(await aExit, 1, `ctrl-a exit code; log tail:\n${a.stderr().slice(-3000)}`);
      assert.match(a.stderr(), /lost the lease .*stepping down/);
    }
    // deno-lint-ignore no-console
    console.error(
      `failover ${kind}/${fault}: ${summary("ctrl-a", proxyA.records)}; ${
        summary("ctrl-b", proxyB.records)
      }; ${proxyA.dropped} requests of ctrl-a dropped while frozen`,
    );
  } finally {
    await stream.stop().catch(() => {});
    if (!aStopped) await a.stop("SIGKILL").catch(() => {});
    if (b) {
      await b.stop("SIGTERM", 20_000).catch(() => {});
      await keepLog(`${fault}-b`, b);
    }
  }
}

for (const kind of clusterKinds()) {
  for (const fault of ["hang", "stop", "kill"] as const) {
    const what = {
      hang: "the leader's API connection hangs",
      stop: "the leader is SIGSTOPped, then resumed",
      kill: "the leader is SIGKILLed",
    }[fault];
    clusterTest(
      kind,
      `leader failover (${kind}): ${what} → the other takes over; never two leaders acting`,
      () => failover(kind, fault),
    );
  }
}
