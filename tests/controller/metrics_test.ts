/**
 * The controller's /metrics, scraped from a controller process after known work: every series it
 * documents is there with the value that work implies — attachments, attached workloads,
 * Mountpoint Pods by phase, the readiness histogram, reconcile outcomes, API requests by verb (the
 * writes equal the minimum the work needs), and Mountpoint Pod creation failures.
 *
 * @module
 */
import assert from "node:assert/strict";
import { EVENTS, NAMESPACES, PODS, SERVICE_ACCOUNTS } from "../../src/kube/resources.ts";
import type { Pod } from "../../src/kube/types.ts";
import { freePort, waitFor } from "../_helpers.ts";
import { clusterKinds, clusterTest, testCluster } from "../testbed/harness/controller_cluster.ts";
import { fixture, stopController } from "./_fixture.ts";

/** Prometheus text → `name{labels}` → value (label order as served). */
async function scrape(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

for (const kind of clusterKinds()) {
  clusterTest(kind, `metrics (${kind}): the controller's series after known work`, async () => {
    await using c = await testCluster(kind);
    const f = fixture(c);
    await f.volume("m");
    await f.volume("unbound", { bound: false });
    const port = freePort();
    const proc = f.controller(["--metrics-address", `127.0.0.1:${port}`, "--leader-elect=false"]);
    try {
      await waitFor("/metrics", () => scrape(port).catch(() => undefined), { timeoutMs: 30_000 });
      // Known work: three workloads share one Mountpoint Pod on node-1, one has its own on node-2,
      // one waits for an unbound claim; the node-1 Mountpoint Pod then runs.
      for (
        const [name, node] of [["a", "node-1"], ["b", "node-1"], ["c", "node-1"], ["d", "node-2"]]
      ) {
        await f.workload(name!, "m", { node: node! });
      }
      await f.workload("waiting", "unbound");
      await waitFor("four workloads attached", async () => {
        const all = await f.attachments();
        return all.reduce(
          (n, a) => n + Object.values(a.spec.mountpointS3PodAttachments).flat().length,
          0,
        ) === 4;
      }, { timeoutMs: 30_000 });
      const node1 = (await f.mpPods()).find((p) =>
        JSON.stringify(p.spec.affinity).includes('"node-1"')
      )!;
      await f.setPhase(node1, "Running");
      // The gauges are refreshed every 5 s: wait for the values, then check everything at once.
      const m = await waitFor("the gauges", async () => {
        const m = await scrape(port);
        return m.get("s3csi_controller_attachments") === 2 &&
          m.get('s3csi_controller_mountpoint_pods{phase="Running"}') === 1 &&
          m.get("s3csi_controller_mountpoint_pod_ready_seconds_count") === 1 && m;
      }, { timeoutMs: 30_000, intervalMs: 200 });
      assert.equal(m.get("s3csi_controller_attached_workloads"), 4);
      assert.equal(m.get('s3csi_controller_mountpoint_pods{phase="Pending"}'), 1);
      assert.ok((m.get("s3csi_controller_mountpoint_pod_ready_seconds_sum") ?? -1) >= 0);
      assert.equal(m.get('s3csi_controller_mountpoint_pod_ready_seconds_bucket{le="+Inf"}'), 1);
      // Writes are at most the minimum: per new Mountpoint Pod a pod and an attachment (2 × 2
      // POSTs), per shared one an attachment update (up to 2 PUTs; fewer when b and c waited
      // together and joined a write), plus one Event for the unbound claim. Exact on the emulator; on the
      // shared real cluster the controller (cluster-wide, as in production) also cleans up after
      // earlier tests whose namespaces are still terminating.
      const requests = (verb: string) =>
        m.get(`s3csi_controller_api_requests_total{verb="${verb}"}`) ?? 0;
      if (kind === "emulator") {
        assert.deepEqual(
          ["POST", "PATCH", "DELETE"].map((v) => [v, requests(v)]),
          [["POST", 5], ["PATCH", 0], ["DELETE", 0]],
        );
        assert.ok(requests("PUT") <= 2, `PUT ${requests("PUT")}`);
      } else {
        assert.ok(requests("POST") >= 5 && requests("PUT") >= 2, "at least the minimum");
      }
      assert.ok(requests("LIST") >= 4, "4 informers");
      assert.ok(requests("WATCH") >= 4);
      // Reconciles: every workload at least once (the waiting one too: it is retried later).
      assert.ok((m.get('s3csi_controller_reconciles_total{result="success"}') ?? 0) >= 5);
      assert.equal(m.get('s3csi_controller_reconciles_total{result="error"}') ?? 0, 0);
      assert.equal(
        m.get("s3csi_controller_reconcile_duration_seconds_count"),
        [...m].filter(([k]) => k.startsWith("s3csi_controller_reconciles_total")).reduce(
          (n, [, v]) => n + v,
          0,
        ),
        "one duration per reconcile",
      );
      assert.equal(m.get("s3csi_controller_mountpoint_pod_create_failures_total"), 0);
      assert.equal(m.get("s3csi_controller_api_errors_total") ?? 0, 0);
    } finally {
      await stopController(proc);
    }
  });

  clusterTest(
    kind,
    `metrics (${kind}): a Mountpoint Pod the API refuses is counted, with an Event, and made once possible`,
    async () => {
      await using c = await testCluster(kind);
      const f = fixture(c);
      await f.volume("m");
      // The Mountpoint namespace does not exist yet: the API refuses the pod.
      const missing = `${c.mpNamespace}-later`;
      const port = freePort();
      const proc = f.controller([
        "--metrics-address",
        `127.0.0.1:${port}`,
        "--leader-elect=false",
        "--mountpoint-namespace",
        missing,
      ]);
      try {
        await f.workload("w", "m");
        await waitFor("a counted failure", async () => {
          const m = await scrape(port).catch(() => undefined);
          // The failed reconcile is observed once it ends, just after the failure is counted.
          return (m?.get("s3csi_controller_mountpoint_pod_create_failures_total") ?? 0) >= 1 &&
            (m?.get('s3csi_controller_reconciles_total{result="error"}') ?? 0) >= 1;
        }, { timeoutMs: 30_000, intervalMs: 200 });
        const event = await waitFor(
          "the Event on the workload",
          async () =>
            (await c.client.list<
              { reason?: string; message?: string; involvedObject?: { name?: string } } & Pod
            >(EVENTS, { namespace: c.namespace })).items.find((e) =>
              e.reason === "MountpointPodCreateFailed" && e.involvedObject?.name === "w"
            ),
        );
        assert.match(event.message ?? "", new RegExp(`Check that namespace ${missing} exists`));
        await c.client.create(NAMESPACES, { metadata: { name: missing } });
        if (kind === "real") {
          await waitFor(
            `serviceaccount ${missing}/default`,
            () => c.client.get(SERVICE_ACCOUNTS, "default", missing),
            { timeoutMs: 30_000, intervalMs: 200 },
          );
        }
        await waitFor(
          "the Mountpoint Pod once the namespace exists",
          async () => (await c.client.list<Pod>(PODS, { namespace: missing })).items.length === 1,
          { timeoutMs: 60_000, intervalMs: 200 },
        );
      } finally {
        await stopController(proc);
        if (kind === "real") await c.client.delete(NAMESPACES, missing).catch(() => {});
      }
    },
  );
}
