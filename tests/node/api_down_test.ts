/**
 * The node plugin while the Kubernetes API server is down (run as root, with RGW): it starts and
 * serves its socket anyway (no crash loop), unpublishes, reports volume stats and republishes
 * mounted targets; a publish that needs the API fails UNAVAILABLE with a clear message within its
 * deadline; once the API answers again, it syncs and publishes new volumes. The outage is a TCP
 * proxy between the node plugin and the API emulator that stops listening and drops connections.
 */
import assert from "node:assert/strict";
import { Code } from "../../src/csi/errors.ts";
import { waitFor } from "../_helpers.ts";
import { kubeletMkdirParent, nodeTest, startHarness } from "../testbed/harness/node_harness.ts";

nodeTest(
  "API server down: the node plugin serves unpublish, stats and mounted volumes; publish is UNAVAILABLE, then works again",
  async () => {
    await using h = await startHarness({ apiProxy: true, nodeArgs: ["--attachment-timeout=3s"] });
    const mp = await h.mountpointPod("mp-down");
    await h.assign("pv-d", "vol-pv-d", mp.name, ["uid-d1", "uid-d2", "uid-d3"]);
    const [t1, t2, t3] = ["uid-d1", "uid-d2", "uid-d3"].map((u) => h.target(u, "pv-d")) as [
      string,
      string,
      string,
    ];
    for (const t of [t1, t2, t3]) await kubeletMkdirParent(t);
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-d1", "pv-d"));
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-d2", "pv-d"));
    await Deno.writeTextFile(`${t1}/before.txt`, "written before the outage\n");

    // The API goes away, and the node plugin restarts while it is away.
    await h.apiProxy!.down();
    await h.restartNode(undefined, { until: "serving" });
    const node = h.node;
    await waitFor(
      "the node plugin to retry the API at least twice",
      () => (node.stderr().match(/List\/watch of \S+ failed/g) ?? []).length >= 2,
      { timeoutMs: 30_000 },
    );
    assert.doesNotMatch(node.stderr(), /Node plugin ready/);

    // Mounted volumes keep working and are reported healthy.
    assert.equal(await Deno.readTextFile(`${t1}/before.txt`), "written before the outage\n");
    const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: "vol-pv-d", volumePath: t1 });
    assert.equal(stats.volumeCondition?.abnormal, false, stats.volumeCondition?.message ?? "");
    // Republish of a mounted target (kubelet's requiresRepublish): fine without the API.
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-d1", "pv-d"));
    // Unpublish needs no API.
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-d", targetPath: t2 });
    assert.ok(!(await h.ourMounts()).includes(t2));
    // A new volume needs the API: a clear UNAVAILABLE once its bounded wait ends (well before the
    // client's deadline, which would answer DEADLINE_EXCEEDED).
    await assert.rejects(
      h.csi.node.nodePublishVolume(h.publishRequest("uid-d3", "pv-d")),
      (e: { code?: number; details?: string }) =>
        e.code === Code.UNAVAILABLE && /Kubernetes API/.test(e.details ?? ""),
    );
    assert.ok(!(await h.ourMounts()).includes(t3));
    // Still the same process: it never exited because of the API.
    assert.equal(h.node, node);
    assert.equal(
      await Promise.race([node.child.status.then(() => "exited"), Promise.resolve("alive")]),
      "alive",
    );

    // The API comes back: the caches fill and new volumes are published.
    h.apiProxy!.up();
    await waitFor("the node plugin to sync", () => node.stderr().includes("Node plugin ready"), {
      timeoutMs: 60_000,
    });
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-d3", "pv-d"));
    assert.equal(await Deno.readTextFile(`${t3}/before.txt`), "written before the outage\n");
    for (const t of [t1, t3]) {
      await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-d", targetPath: t });
    }
  },
);
