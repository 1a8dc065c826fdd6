/**
 * A controller restarted while attachments exist releases every deleted workload without the
 * stale cleaner's periodic sweep (its interval and threshold stay at their defaults, minutes):
 * - a workload deleted while no controller runs;
 * - a workload deleted after the new process started but before it leads (it waits for the lease
 *   the killed one left: the real-node tier's "controller killed mid-reconcile" deletes its
 *   workloads in that window) — neither ever gives the new process's informer a delete event;
 * - workloads deleted once it leads: through the event path; the last one's Mountpoint Pod is
 *   marked `needs-unmount`, its S3PA deleted, and the pod deleted once it has exited.
 *
 * The first controller is killed (SIGKILL: its lease is not released). The test then holds the
 * lease itself for an hour, so "before it leads" is certain rather than a race, and releases it as
 * a stepping-down leader does.
 *
 * @module
 */
import assert from "node:assert/strict";
import { LEASES, PODS } from "../../src/kube/resources.ts";
import type { Lease, Pod } from "../../src/kube/types.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import { LEADER_LEASE_NAME } from "../../src/options/controller_options.ts";
import { waitFor } from "../_helpers.ts";
import {
  clusterKinds,
  clusterTest,
  type TestCluster,
  testCluster,
} from "../testbed/harness/controller_cluster.ts";
import { type Fixture, fixture, stopController } from "./_fixture.ts";

/** Workload UIDs listed by the fixture's attachments. */
async function listed(f: Fixture): Promise<string[]> {
  return (await f.attachments()).flatMap((a) =>
    Object.values(a.spec.mountpointS3PodAttachments).flat().map((w) => w.workloadPodUID)
  ).sort();
}

/** Set the leader Lease's holder (and duration); "" releases it. */
async function setHolder(c: TestCluster, holder: string, seconds: number): Promise<void> {
  const lease = await c.client.get<Lease>(LEASES, LEADER_LEASE_NAME, c.mpNamespace);
  assert.ok(lease, "the killed controller's lease");
  await c.client.update<Lease>(LEASES, {
    ...lease,
    spec: { ...lease.spec, holderIdentity: holder, leaseDurationSeconds: seconds },
  });
}

/**
 * Delete a workload and wait until the API no longer has it. On the emulator a deletion without
 * `grace` is graceful (deletionTimestamp first, removal next, as a kubelet finishes it); the real
 * API server has no kubelet here, so it always deletes at once.
 */
async function deleteWorkload(c: TestCluster, name: string, grace?: number): Promise<void> {
  const graceful = grace === undefined && c.name === "emulator";
  await c.client.delete(
    PODS,
    name,
    c.namespace,
    graceful ? {} : { gracePeriodSeconds: grace ?? 0 },
  );
  await waitFor(
    `${name} gone from the API`,
    async () => !(await c.client.get(PODS, name, c.namespace)),
  );
}

for (const kind of clusterKinds()) {
  clusterTest(
    kind,
    `controller (${kind}): restarted with attachments → releases workloads deleted while down, before it leads, and after`,
    async (t) => {
      await using c = await testCluster(kind);
      const f = fixture(c);
      await f.volume("r");
      const uids = new Map<string, string>();
      for (const n of ["r0", "r1", "r2", "r3", "r4"]) {
        const p = await f.workload(n, "r");
        await f.setPhase(p, "Running");
        uids.set(n, p.metadata.uid!);
      }
      const uidsOf = (...names: string[]) => names.map((n) => uids.get(n)!).sort();
      const first = f.controller();
      let mpName = "";
      try {
        await waitFor("five workloads on one Mountpoint Pod", async () => {
          const all = await f.attachments();
          return all.length === 1 && (await listed(f)).length === 5;
        }, { timeoutMs: 30_000 });
        const mps = await f.mpPods();
        assert.equal(mps.length, 1, "one Mountpoint Pod");
        mpName = mps[0]!.metadata.name!;
        await f.setPhase(mps[0]!, "Running");
      } finally {
        await first.stop("SIGKILL");
      }
      await setHolder(c, "killed-leader", 3600);
      await deleteWorkload(c, "r0"); // while no controller runs
      const second = f.controller();
      try {
        await waitFor(
          "the second controller contending",
          () => second.stderr().includes("Starting controller"),
        );
        await deleteWorkload(c, "r1"); // it runs, but cannot lead yet
        assert.equal(
          (await c.client.get<Lease>(LEASES, LEADER_LEASE_NAME, c.mpNamespace))?.spec
            .holderIdentity,
          "killed-leader",
          "r1 went before the second controller could lead",
        );
        assert.deepEqual(await listed(f), uidsOf("r0", "r1", "r2", "r3", "r4"));
        await setHolder(c, "", 1);
        await t.step("workloads deleted before it led are released once it leads", async () => {
          await waitFor("r0 and r1 released", async () => {
            const now = await listed(f);
            return !now.includes(uids.get("r0")!) && !now.includes(uids.get("r1")!);
          }, { timeoutMs: 30_000 });
          assert.deepEqual(await listed(f), uidsOf("r2", "r3", "r4"));
          const mp = await c.client.get<Pod>(PODS, mpName, c.mpNamespace);
          assert.equal(
            mp?.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT],
            undefined,
            "still used",
          );
        });
        await t.step("workloads deleted after it leads are released", async () => {
          await deleteWorkload(c, "r2");
          await waitFor("r2 released", async () => !(await listed(f)).includes(uids.get("r2")!), {
            timeoutMs: 30_000,
          });
          await deleteWorkload(c, "r3", 0);
          await waitFor("r3 released", async () => !(await listed(f)).includes(uids.get("r3")!), {
            timeoutMs: 30_000,
          });
          assert.deepEqual(await listed(f), uidsOf("r4"));
        });
        await t.step(
          "the last workload deleted → S3PA deleted, Mountpoint Pod needs-unmount, then deleted",
          async () => {
            await deleteWorkload(c, "r4");
            await waitFor("the S3PA deleted", async () => (await f.attachments()).length === 0, {
              timeoutMs: 30_000,
            });
            const mp = await waitFor("needs-unmount", async () => {
              const p = await c.client.get<Pod>(PODS, mpName, c.mpNamespace);
              return p?.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT] === "true" && p;
            }, { timeoutMs: 30_000 });
            // The node plugin unmounts and the Mountpoint Pod exits, as the kubelet reports it.
            await f.setPhase(mp, "Succeeded");
            await waitFor(
              "the Mountpoint Pod deleted",
              async () => !(await c.client.get(PODS, mpName, c.mpNamespace)),
              { timeoutMs: 30_000 },
            );
          },
        );
      } finally {
        await stopController(second);
      }
    },
  );
}
