/**
 * A `NoExecute` taint on a node with running workloads (`tests/scenarios/writer.ts`) of one volume:
 * one workload tolerates it, one does not. Mountpoint Pods tolerate only what their workloads need
 * to keep their volumes (`src/mppod/tolerations.ts`), so the two get separate Mountpoint Pods. The
 * taint evicts the intolerant workload — its closed writes are in S3 — and its Mountpoint Pod,
 * which is released once the workload is gone; the tolerant workload keeps writing through its own
 * Mountpoint Pod, which stays; a new tolerant workload joins it on the tainted node. The taint
 * removed and the workloads deleted, nothing is left.
 *
 * Two nodes: the taint goes on one that runs none of the driver's Deployments (in a cluster the
 * controller runs elsewhere; on a single node the taint would evict it, and nothing would attach or
 * release). The intolerant writer starts first: a workload shares a Mountpoint Pod whose
 * tolerations cover its own, so the tolerant one, started second, gets its own.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PODS } from "../../src/kube/resources.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, type ScenarioCluster, type Taint, unique } from "./cluster.ts";
import { CONTROLLER_DEPLOYMENT, PROVISIONER_DEPLOYMENT } from "../../src/deploy/names.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import { checkWrites, lastClosed, writerScript } from "./writer.ts";

const TAINT: Taint = { key: "s3csi.test/maintenance", value: "now", effect: "NoExecute" };
const TOLERATION = { key: TAINT.key, operator: "Equal", value: "now", effect: "NoExecute" };

/** A node where no pod of the driver's Deployments (controller, provisioning) runs. */
async function nodeWithoutDriverDeployments(e: ScenarioCluster): Promise<string> {
  const used = new Set(
    (await e.client.list<Pod>(PODS, { namespace: defaultValues().namespace })).items
      .filter((p) =>
        [CONTROLLER_DEPLOYMENT, PROVISIONER_DEPLOYMENT].includes(p.metadata.labels?.app ?? "")
      )
      .map((p) => p.spec.nodeName),
  );
  const free = e.nodeNames().find((n) => !used.has(n));
  if (!free) throw new Error(`every node runs a pod of the driver's Deployments: ${[...used]}`);
  return free;
}

/** The scenario. */
export const NO_EXECUTE_TAINT: Scenario = {
  name:
    "a NoExecute taint evicts only the workloads that do not tolerate it, then their Mountpoint Pod",
  nodes: 2,
  realNodeOnly: true,
  async run(e, step) {
    const node = await nodeWithoutDriverDeployments(e);
    const bucket = await e.bucket("taint");
    const vol = `taint-${unique()}`;
    const keeper = `taint-keeps-${unique()}`;
    const leaver = `taint-leaves-${unique()}`;
    const joiner = `taint-joins-${unique()}`;
    const start = (name: string, tolerant: boolean) =>
      e.pod({
        name,
        node,
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: writerScript(),
        env: { POD_NAME: name },
        ...(tolerant ? { tolerations: [TOLERATION] } : {}),
      });
    let tainted = false;
    try {
      await e.staticVolume(vol, { bucket });
      let keeperMp = "";
      let leaverMp = "";
      await step(
        "two writers of one volume on one node, one tolerating the taint: two Mountpoint Pods, only one tolerates it",
        async () => {
          const l = await start(leaver, false);
          await e.waitLog(l, "CLOSED 3");
          const k = await start(keeper, true);
          await e.waitLog(k, "CLOSED 3");
          keeperMp = (await e.mountpointPodOf(k))!;
          leaverMp = (await e.mountpointPodOf(l))!;
          assert.ok(keeperMp && leaverMp, "both have a Mountpoint Pod");
          assert.notEqual(keeperMp, leaverMp, "different NoExecute tolerations: not shared");
          const mps = await e.mountpointPods();
          const tolerates = (name: string) =>
            JSON.stringify(mps.find((p) => p.metadata.name === name)?.spec.tolerations ?? [])
              .includes(TAINT.key);
          assert.ok(tolerates(keeperMp), "the keeper's Mountpoint Pod tolerates the taint");
          assert.ok(!tolerates(leaverMp), "the leaver's does not");
          for (const p of mps) {
            assert.ok(
              !(p.spec.tolerations ?? []).some((t) => !t.key && !t.effect),
              `${p.metadata.name} does not tolerate every taint`,
            );
          }
        },
      );
      await step(
        `taint ${TAINT.key}=${TAINT.value}:NoExecute: the intolerant writer and its Mountpoint Pod are evicted, its closed writes are in S3`,
        async () => {
          const keeperPod = (await e.client.get<Pod>(PODS, keeper, e.ns))!;
          const before = lastClosed(await e.log(keeperPod));
          await e.taint(node, TAINT);
          tainted = true;
          await waitFor(
            "the intolerant writer evicted",
            async () => !(await e.client.get(PODS, leaver, e.ns)),
            { timeoutMs: 60_000, intervalMs: 200 },
          );
          await waitFor(
            `its Mountpoint Pod ${leaverMp} gone`,
            async () => !(await e.mountpointPods()).some((p) => p.metadata.name === leaverMp),
            { timeoutMs: 90_000, intervalMs: 250 },
          );
          const files = await checkWrites(e, bucket, leaver, 4);
          // The keeper wrote on meanwhile and goes on.
          await e.waitLog(keeperPod, `CLOSED ${before + 10}`, 60_000);
          return `on ${node}; the evicted writer's ${files} files in S3`;
        },
      );
      await step(
        "the tolerant writer keeps its Mountpoint Pod and its volume; a new tolerant workload joins it on the tainted node",
        async () => {
          const mp = (await e.mountpointPods()).find((p) => p.metadata.name === keeperMp);
          assert.ok(mp && !mp.metadata.deletionTimestamp, "the keeper's Mountpoint Pod stays");
          assert.equal(mp.status?.phase, "Running");
          const j = await start(joiner, true);
          await e.waitLog(j, "CLOSED 3");
          assert.equal(await e.mountpointPodOf(j), keeperMp, "shares the tolerant Mountpoint Pod");
          const keeperPod = (await e.client.get<Pod>(PODS, keeper, e.ns))!;
          assert.equal(keeperPod.status?.phase, "Running");
          assert.doesNotMatch(await e.log(keeperPod), /FAILED/);
        },
      );
      await step("taint removed, workloads deleted: released, nothing mounted", async () => {
        await e.untaint(node, TAINT.key);
        tainted = false;
        await e.deletePod(keeper);
        await e.deletePod(joiner);
        await e.waitReleased(90_000);
        assert.deepEqual(await e.fuseMountsOn(node), [], "no FUSE mount on the node");
        await checkWrites(e, bucket, keeper, 14);
        await checkWrites(e, bucket, joiner, 4);
      });
    } finally {
      if (tainted) await e.untaint(node, TAINT.key).catch(() => {});
      for (const p of [keeper, leaver, joiner]) await e.deletePod(p).catch(() => {});
      await e.dropVolume(vol);
      await e.dropBucket(bucket);
    }
  },
};
