/**
 * The sandbox's closing check of Mountpoint Pods and workloads (`ScenarioCluster.closingCheck`,
 * issue "Mounts outlive their engine" item 5): it passes on a healthy workload and names a
 * workload whose mount is dead — here the FUSE connection aborted through fusectl, which is what
 * a workload saw before custody: "Transport endpoint is not connected".
 */
import assert from "node:assert/strict";
import { PODS } from "../../src/kube/resources.ts";
import { abortFuseConnection } from "../../src/sys/mount.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { unique } from "../scenarios/cluster.ts";
import { e2eTest } from "../testbed/harness/e2e_cluster.ts";

e2eTest("e2e: the closing check names a workload whose mount is dead", 1, async (e, t) => {
  const bucket = await e.bucket("closing");
  const vol = `closing-${unique()}`;
  const name = `closing-${unique()}`;
  try {
    await e.put(bucket, "a.txt", new TextEncoder().encode("a\n"));
    await e.staticVolume(vol, { bucket });
    const w = await e.pod({
      name,
      volumes: [{ claim: vol, mountPath: "/data" }],
      script: "cat /data/a.txt && echo READY; exec sleep 600",
    });
    await e.waitLog(w, "READY");
    await t.step("healthy: one workload mount checked, no problem", async () => {
      const r = await e.closingCheck();
      assert.deepEqual(r.problems, []);
      assert.match(r.detail, /^0 Mountpoint container restart\(s\); 1 workload mount\(s\) checked/);
    });
    await t.step("its FUSE connection aborted: the check names the workload", async () => {
      const scheduled = (await e.client.get<Pod>(PODS, name, e.ns))!;
      const target = (await e.workloadMountViews(scheduled))[0]?.view;
      assert.ok(target, "the scheduled workload has a volume mount");
      const mount = (await e.fuseMounts()).find((m) => m.mountPoint === target);
      assert.ok(mount, `the workload's target path ${target} is a FUSE mount`);
      assert.equal(await abortFuseConnection(mount.minor), "aborted");
      const r = await e.closingCheck();
      assert.equal(r.problems.length, 1, r.problems.join("\n"));
      assert.match(
        r.problems[0]!,
        new RegExp(
          `^workload ${name}: .* fails from inside: .*Transport endpoint is not connected`,
        ),
      );
    });
  } finally {
    await e.deletePod(name).catch(() => {});
    await e.waitReleased().catch(() => {});
    await e.dropVolume(vol);
    await e.dropBucket(bucket);
  }
});
