/**
 * Node plugin lifecycle on the real kernel with RGW (run as root): the agent-not-ready taint is
 * removed, metrics are served, a deleted Mountpoint Pod's source is cleaned, and a restarted node
 * plugin cleans sources orphaned while it was down.
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import { NODES, PODS } from "../../src/kube/resources.ts";
import { TAINT_AGENT_NOT_READY } from "../../src/mppod/labels.ts";
import { exists, freePort, waitFor } from "../_helpers.ts";
import {
  kubeletMkdirParent,
  NODE,
  nodeTest,
  startHarness,
} from "../testbed/harness/node_harness.ts";

nodeTest("taint removed, metrics served, deleted and orphaned sources cleaned", async () => {
  const port = freePort();
  await using h = await startHarness({ nodeArgs: [`--metrics-port=${port}`] });
  await waitFor("the agent-not-ready taint to go", async () => {
    const node = await h.kube.get<KubeObject & { spec?: { taints?: { key: string }[] } }>(
      NODES,
      NODE,
    );
    return !(node?.spec?.taints ?? []).some((t) => t.key === TAINT_AGENT_NOT_READY);
  }, { timeoutMs: 30_000 });

  const mp = await h.mountpointPod("mp-life");
  await h.assign("pv-l", "vol-pv-l", mp.name, ["uid-l"]);
  const t = h.target("uid-l", "pv-l");
  await kubeletMkdirParent(t);
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-l", "pv-l"));
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  assert.match(metrics, /s3csi_node_operations_total\{operation="publish",result="OK"\} 1/);
  assert.match(metrics, /s3csi_node_source_mounts 1/);
  assert.match(metrics, /s3csi_node_bind_mounts 1/);
  assert.match(metrics, /s3csi_node_unhealthy_mounts 0/);
  assert.match(metrics, /s3csi_node_operation_duration_seconds_bucket/);

  // Orphaned while the node plugin was down: the pod is deleted, the source stays mounted.
  const source = `${h.root}/plugins/s3.csi.scality.com/mnt/${mp.name}`;
  await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-l", targetPath: t });
  await h.restartNode(async () => {
    await h.kube.delete(PODS, mp.name, "mount-s3", { gracePeriodSeconds: 0 });
    assert.ok(await exists(source));
  });
  await waitFor("the orphaned source to be cleaned", async () => !(await exists(source)), {
    timeoutMs: 30_000,
  });
  assert.deepEqual(await h.ourMounts(), []);
  const status = await mp.mounter.child.status;
  assert.notEqual(status.code, null);

  // Deleted while the node plugin runs.
  const mp2 = await h.mountpointPod("mp-life2");
  await h.assign("pv-l2", "vol-pv-l2", mp2.name, ["uid-l2"]);
  const t2 = h.target("uid-l2", "pv-l2");
  await kubeletMkdirParent(t2);
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-l2", "pv-l2"));
  await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-l2", targetPath: t2 });
  await h.kube.delete(PODS, mp2.name, "mount-s3", { gracePeriodSeconds: 0 });
  await waitFor(
    "the deleted pod's source to be cleaned",
    async () => (await h.ourMounts()).length === 0,
    { timeoutMs: 30_000 },
  );
});

nodeTest("a node plugin restart keeps live mounts and reuses them", async () => {
  await using h = await startHarness();
  const mp = await h.mountpointPod("mp-keep");
  await h.assign("pv-k", "vol-pv-k", mp.name, ["uid-k1", "uid-k2"]);
  const [t1, t2] = [h.target("uid-k1", "pv-k"), h.target("uid-k2", "pv-k")];
  await kubeletMkdirParent(t1);
  await kubeletMkdirParent(t2);
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-k1", "pv-k"));
  await Deno.writeTextFile(`${t1}/keep.txt`, "kept\n");
  await h.restartNode();
  assert.equal(await Deno.readTextFile(`${t1}/keep.txt`), "kept\n", "mount survives");
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-k2", "pv-k"));
  assert.equal(await Deno.readTextFile(`${t2}/keep.txt`), "kept\n");
  assert.match(h.node.stderr(), /Published volume "vol-pv-k" .* \("bind"\)/);
  assert.equal((await h.ourMounts()).length, 3, "one source, two binds");
});
