/**
 * The controller as a real process against the API emulator (and the real kube-apiserver tier when
 * KUBE_REAL_KUBECONFIG is set). Mountpoint Pod phases are set through the status subresource, as a
 * kubelet would.
 */
import assert from "node:assert/strict";
import { EVENTS, LEASES, PODS } from "../../src/kube/resources.ts";
import type { Lease, Pod } from "../../src/kube/types.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import { waitFor } from "../_helpers.ts";
import { clusterKinds, clusterTest, testCluster } from "../testbed/harness/controller_cluster.ts";
import { fixture, stopController } from "./_fixture.ts";

for (const kind of clusterKinds()) {
  clusterTest(
    kind,
    `controller (${kind}): sharing, separation, detach, needs-unmount, Succeeded cleanup, recreation`,
    async (t) => {
      await using c = await testCluster(kind);
      const f = fixture(c);
      await f.volume("a");
      await f.volume("b", { mountOptions: ["allow-delete", "read-only"] });
      const proc = f.controller();
      try {
        await t.step("one workload → one Mountpoint Pod + one S3PA", async () => {
          const w = await f.workload("w1", "a");
          const [a] = await waitFor(
            "an attachment",
            async () => (await f.attachments()).length === 1 && await f.attachments(),
          );
          const mps = await f.mpPods();
          assert.equal(mps.length, 1);
          const mp = mps[0]!;
          assert.deepEqual(
            a!.spec.mountpointS3PodAttachments[mp.metadata.name!]!.map((x) => x.workloadPodUID),
            [w.metadata.uid],
          );
          assert.equal(a!.spec.nodeName, "node-1");
          assert.equal(a!.spec.mountOptions, "allow-delete");
          assert.equal(mp.spec.securityContext?.runAsNonRoot, true);
          assert.deepEqual(
            (mp.spec.affinity as {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: { matchFields: { values: string[] }[] }[];
                };
              };
            })
              .nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]!
              .matchFields[0]!.values,
            ["node-1"],
          );
        });
        await t.step("same node/PV/options/fsGroup → shared", async () => {
          await f.workload("w2", "a");
          await f.workload("w3", "a");
          await waitFor("three workloads on one pod", async () => {
            const [a] = await f.attachments();
            return a && Object.values(a.spec.mountpointS3PodAttachments).flat().length === 3;
          });
          assert.equal((await f.mpPods()).length, 1);
        });
        await t.step("different fsGroup, options or node → separate", async () => {
          await f.workload("fs", "a", { fsGroup: 4242 });
          await f.workload("opts", "b");
          await f.workload("n2", "a", { node: "node-2" });
          await waitFor("four attachments", async () => (await f.attachments()).length === 4);
          assert.equal((await f.mpPods()).length, 4);
        });
        await t.step(
          "workload deleted → removed; last one → needs-unmount, S3PA deleted; Succeeded → pod deleted",
          async () => {
            const mpName = (await f.mpPods()).find((p) =>
              p.spec.affinity && JSON.stringify(p.spec.affinity).includes("node-2")
            )!.metadata.name!;
            await c.client.delete(PODS, "n2", c.namespace, { gracePeriodSeconds: 0 });
            await waitFor(
              "the node-2 attachment to go",
              async () => (await f.attachments()).length === 3,
            );
            const mp = await waitFor("needs-unmount", async () => {
              const p = await c.client.get<Pod>(PODS, mpName, c.mpNamespace);
              return p?.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT] === "true" && p;
            });
            await f.setPhase(mp, "Succeeded");
            await waitFor(
              "the Succeeded Mountpoint Pod to be deleted",
              async () => !(await c.client.get(PODS, mpName, c.mpNamespace)),
            );
            await c.client.delete(PODS, "w1", c.namespace, { gracePeriodSeconds: 0 });
            await waitFor("w1 detached", async () => {
              const a = (await f.attachments()).find((x) =>
                x.spec.mountOptions === "allow-delete" && x.spec.workloadFSGroup === ""
              );
              return a && Object.values(a.spec.mountpointS3PodAttachments).flat().length === 2;
            });
          },
        );
        await t.step(
          "Mountpoint Pod deleted by hand while workloads remain → recreated",
          async () => {
            const a = (await f.attachments()).find((x) =>
              x.spec.mountOptions === "allow-delete" && x.spec.workloadFSGroup === ""
            )!;
            const mpName = Object.keys(a.spec.mountpointS3PodAttachments)[0]!;
            const before = await c.client.get<Pod>(PODS, mpName, c.mpNamespace);
            await c.client.delete(PODS, mpName, c.mpNamespace, { gracePeriodSeconds: 0 });
            await waitFor("a new Mountpoint Pod with the same name", async () => {
              const p = await c.client.get<Pod>(PODS, mpName, c.mpNamespace);
              return p && p.metadata.uid !== before!.metadata.uid;
            }, { timeoutMs: 20_000 });
          },
        );
        await t.step("a failed Mountpoint Pod with workloads is replaced", async () => {
          const a = (await f.attachments()).find((x) =>
            x.spec.mountOptions === "allow-delete" && x.spec.workloadFSGroup === ""
          )!;
          const mpName = Object.keys(a.spec.mountpointS3PodAttachments)[0]!;
          const before = (await c.client.get<Pod>(PODS, mpName, c.mpNamespace))!;
          await f.setPhase(before, "Failed");
          await waitFor("a replacement", async () => {
            const p = await c.client.get<Pod>(PODS, mpName, c.mpNamespace);
            return p && p.metadata.uid !== before.metadata.uid && p.status?.phase !== "Failed";
          }, { timeoutMs: 20_000 });
        });
      } finally {
        await stopController(proc);
      }
    },
  );

  clusterTest(
    kind,
    `controller (${kind}): an unbound PVC gets an Event that says what to do`,
    async () => {
      await using c = await testCluster(kind);
      const f = fixture(c);
      await f.volume("u", { bound: false });
      const proc = f.controller();
      try {
        await f.workload("waiting", "u");
        const ev = await waitFor(
          "the event",
          async () =>
            (await c.client.list<
              { reason?: string; message?: string; involvedObject?: { name?: string } } & Pod
            >(EVENTS, { namespace: c.namespace }))
              .items.find((e) =>
                e.reason === "PersistentVolumeClaimUnbound" && e.involvedObject?.name === "waiting"
              ),
        );
        assert.match(
          ev.message ?? "",
          /is not bound yet.*check that a matching PersistentVolume exists/,
        );
        assert.equal((await f.mpPods()).length, 0);
      } finally {
        await stopController(proc);
      }
    },
  );

  clusterTest(
    kind,
    `controller (${kind}): killed mid-work and restarted → no duplicates; stale entries cleaned`,
    async () => {
      await using c = await testCluster(kind);
      const f = fixture(c);
      await f.volume("k");
      for (let i = 0; i < 12; i++) await f.workload(`k${i}`, "k");
      const first = f.controller();
      await waitFor("some progress", async () => (await f.attachments()).length > 0, {
        timeoutMs: 30_000,
        intervalMs: 5,
      });
      await first.stop("SIGKILL");
      // While it is down, two workloads vanish.
      await c.client.delete(PODS, "k0", c.namespace, { gracePeriodSeconds: 0 });
      await c.client.delete(PODS, "k1", c.namespace, { gracePeriodSeconds: 0 });
      const second = f.controller([
        "--stale-cleanup-interval=1s",
        "--stale-attachment-threshold=1s",
      ]);
      try {
        await waitFor("10 workloads attached", async () => {
          const all = await f.attachments();
          return all.length === 1 &&
            Object.values(all[0]!.spec.mountpointS3PodAttachments).flat().length === 10;
        }, { timeoutMs: 30_000 });
        assert.equal((await f.mpPods()).length, 1, "exactly one Mountpoint Pod");
      } finally {
        await stopController(second);
      }
    },
  );

  clusterTest(
    kind,
    `controller (${kind}): two replicas → one leader acts, the other takes over`,
    async () => {
      await using c = await testCluster(kind);
      const f = fixture(c);
      await f.volume("l");
      const one = f.controller();
      const two = f.controller();
      let stoppedOne = false;
      try {
        const lease = await waitFor("a leader", async () => {
          const l = await c.client.get<Lease>(LEASES, "s3-csi-controller", c.mpNamespace);
          return l?.spec.holderIdentity && l;
        });
        await f.workload("l1", "l");
        await waitFor("an attachment", async () => (await f.attachments()).length === 1);
        await waitFor(
          "the attach log line",
          () => [one, two].some((p) => p.stderr().includes("Attached workload")),
        );
        const acting = [one, two].filter((p) => p.stderr().includes("Attached workload"));
        assert.equal(acting.length, 1, "exactly one replica attached");
        assert.ok(acting[0]!.stderr().includes("became leader"));
        // Stop the leader: the other takes the lease and serves new workloads.
        const leader = acting[0]!;
        const follower = leader === one ? two : one;
        await stopController(leader);
        if (leader === one) stoppedOne = true;
        await f.workload("l2", "l");
        await waitFor(
          "the follower to attach l2",
          () => follower.stderr().includes("Attached workload"),
          { timeoutMs: 30_000 },
        );
        const now = await c.client.get<Lease>(LEASES, "s3-csi-controller", c.mpNamespace);
        assert.notEqual(now?.spec.holderIdentity, lease.spec.holderIdentity);
      } finally {
        if (!stoppedOne) await one.stop("SIGTERM").catch(() => {});
        await two.stop("SIGTERM").catch(() => {});
      }
    },
  );
}
