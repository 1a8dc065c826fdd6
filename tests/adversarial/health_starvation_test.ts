/**
 * Health-check starvation (issue "node boundary, round 2", item 1), against the real node plugin:
 * a Mountpoint Pod (a uid-1000 process in its role, `_stall_fuse.c`) answers INIT and GETATTR but
 * never OPENDIR — the node plugin's health probe — and takes every new connection the node plugin
 * hands it. Each republish of its volume finds the mount hung.
 *
 * Before: the publisher mounted the source again without ending the old connection, and the probe
 * on it stayed stuck, holding a blocking thread (waiting in the kernel for an answer) and one of
 * the 64 probe slots: one more per republish (measured on the unmodified code: 8 republishes, 8
 * threads stuck, no bound), and after 64 every other volume of the node was reported abnormal and
 * repaired. Now: the hung connection is aborted before
 * the source is mounted again (its probe ends), probes are one per pod, a check over the cap is
 * "unknown" and never a reason to unmount, and after three remounts in ten minutes the pod is
 * marked broken and refused. The node plugin's threads stay bounded and a healthy volume beside it
 * stays healthy and untouched throughout.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Code } from "../../src/csi/errors.ts";
import { PODS } from "../../src/kube/resources.ts";
import { ANNOTATION_BROKEN } from "../../src/mppod/labels.ts";
import { runToEnd } from "../_helpers.ts";
import { kubeletMkdirParent, nodeTest, startHarness } from "../testbed/harness/node_harness.ts";
import { exited, hostileMounter, threadsOf } from "./_adversarial.ts";

const SOURCE = new URL("./_stall_fuse.c", import.meta.url).pathname;

/** Threads of `pid` waiting in the kernel for a FUSE answer (a stuck health probe each). */
async function stuckOnFuse(pid: number): Promise<number> {
  let n = 0;
  for await (const t of Deno.readDir(`/proc/${pid}/task`)) {
    const wchan = await Deno.readTextFile(`/proc/${pid}/task/${t.name}/wchan`).catch(() => "");
    if (wchan === "request_wait_answer") n++;
  }
  return n;
}

function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`ADVERSARIAL ${line}\n`));
}

nodeTest(
  "adversarial: a pod that stalls OPENDIR cannot starve the health checks of other volumes",
  async () => {
    const bin = await Deno.makeTempDir({ prefix: "s3csi-stall-" });
    await Deno.chmod(bin, 0o755);
    const cc = await runToEnd("cc", ["-O1", "-o", `${bin}/stall`, SOURCE]);
    assert.equal(cc.code, 0, cc.stderr);
    await using h = await startHarness({
      s3: "versitygw",
      nodeArgs: ["--mount-timeout=10s", "--attachment-timeout=10s"],
    });
    try {
      // A healthy volume beside.
      const good = await h.mountpointPod("mp-good");
      await h.assign("pv-good", "vol-pv-good", good.name, ["uid-good"]);
      const goodTarget = h.target("uid-good", "pv-good");
      await kubeletMkdirParent(goodTarget);
      await h.csi.node.nodePublishVolume(h.publishRequest("uid-good", "pv-good"));
      // The stalling pod (protocol 1: no session the node plugin would wait for).
      const stall = await h.mountpointPod("mp-stall", {
        mounter: hostileMounter(`stall:${bin}/stall`),
        protocols: "1-1",
      });
      await h.assign("pv-s", "vol-pv-s", stall.name, ["uid-s"]);
      await kubeletMkdirParent(h.target("uid-s", "pv-s"));
      const publish = () => h.csi.node.nodePublishVolume(h.publishRequest("uid-s", "pv-s"));
      await publish();
      const pid = h.node.child.pid;
      const threads0 = await threadsOf(pid);
      const outcomes: string[] = [];
      for (let i = 0; i < 8; i++) {
        // The kubelet's republish: the stalled mount is found hung.
        const r = await publish().then(() => "ok", (e) => {
          if (e?.code !== Code.FAILED_PRECONDITION) throw e;
          return /marked broken|was given up/.test(e.details ?? e.message) ? "broken" : e.message;
        });
        outcomes.push(r);
        const stats = await h.csi.node.nodeGetVolumeStats({
          volumeId: "vol-pv-good",
          volumePath: goodTarget,
        });
        assert.equal(
          stats.volumeCondition?.abnormal,
          false,
          `the healthy volume stays healthy (round ${i + 1}): ${stats.volumeCondition?.message}`,
        );
      }
      const threads = await threadsOf(pid);
      const stuck = await stuckOnFuse(pid);
      report(
        `stalling pod republished 8 times: ${
          outcomes.join(", ")
        }; node plugin threads ${threads0} → ${threads}, waiting on a FUSE answer: ${stuck}`,
      );
      assert.ok(stuck <= 1, `${stuck} threads wait on a FUSE answer: probes stranded`);
      assert.deepEqual(outcomes.slice(0, 3), ["ok", "ok", "ok"], "three remounts");
      assert.ok(outcomes.slice(3).every((o) => o === "broken"), `then refused: ${outcomes}`);
      const annotated = (await h.kube.get<{ metadata: { annotations?: Record<string, string> } }>(
        PODS,
        "mp-stall",
        "mount-s3",
      ))?.metadata.annotations?.[ANNOTATION_BROKEN];
      assert.match(annotated ?? "", /stopped answering 4 times within 10 minutes/);
      // The healthy volume's republish is a no-op.
      await h.csi.node.nodePublishVolume(h.publishRequest("uid-good", "pv-good"));
      assert.equal(await exited(h.node), false);
    } finally {
      await Deno.remove(bin, { recursive: true }).catch(() => {});
    }
  },
  { s3: "versitygw" },
);
