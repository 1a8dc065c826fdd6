/**
 * Mounts outlive their engine, through node plugin → mounter → supervisor → `mount-s3` on
 * versitygw: a workload holding a nested directory as cwd and a file open for reading, writing,
 * reading and listing in a loop, while
 *
 * - the engine is SIGKILLed three times (the supervisor starts a new one on the same FUSE
 *   connection, which resumes the session), and
 * - the whole Mountpoint container dies twice (supervisor and engine SIGKILLed together, as an OOM
 *   kill of the container does) and a new mounter starts in it (the kubelet's restart): the node
 *   plugin hands it the connection it kept, and the new engine resumes the session — the second
 *   time after the node plugin itself was restarted (it took the custody back from the
 *   supervisor on `custody.sock`).
 *
 * The workload sees no error and its data is byte-identical; the kernel mount is never made again;
 * the pause from each kill to the workload's next answered operation is printed.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { percentile, waitFor } from "../_helpers.ts";
import { sha256, testBytes } from "../testbed/harness/engine.ts";
import {
  lostWrites,
  pauseAfter,
  startWorkload,
  workloadErrors,
} from "../testbed/harness/engine_session.ts";
import {
  engineNodeTest,
  enginePid,
  publishVolume,
  startEngineNode,
} from "../testbed/harness/engine_node.ts";

function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`SESSION ${line}\n`));
}

engineNodeTest(
  "the engine killed 3 times, its container twice, the node plugin once: no error",
  async () => {
    await using h = await startEngineNode();
    const held = testBytes(5 * 1024 * 1024 + 7, 33);
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "k/a/held.bin", Body: held }));
    const v = await publishVolume(h, { flags: ["allow-delete", "allow-overwrite"] });
    const fuseMounts = async () =>
      (await readMountInfo()).filter((m) =>
        m.fsType.startsWith("fuse") && m.mountPoint.startsWith(h.root)
      );
    const before = await fuseMounts();
    const workload = startWorkload(`${v.target}/k/a`, "held.bin");
    await new Promise((r) => setTimeout(r, 2000));
    const kills: { how: string; at: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const pid = await enginePid(v.mp);
      kills.push({ how: "engine SIGKILL", at: Date.now() });
      Deno.kill(pid, "SIGKILL");
      await waitFor("a new engine", async () => (await enginePid(v.mp)) !== pid, {
        timeoutMs: 30_000,
      });
      await new Promise((r) => setTimeout(r, 1500));
    }
    // The whole container: the supervisor (the mounter's pid) and its engine, at once; the
    // second time after the node plugin itself was restarted (it takes its custody back).
    for (const how of ["container SIGKILL", "container SIGKILL after a node plugin restart"]) {
      if (how.includes("node plugin")) await h.restartNode();
      const engine = await enginePid(v.mp);
      kills.push({ how, at: Date.now() });
      Deno.kill(v.mp.mounter.child.pid, "SIGKILL");
      Deno.kill(engine, "SIGKILL");
      await v.mp.mounter.child.status;
      await h.restartMounter(v.mp); // the kubelet restarts the container
      await waitFor("the resumed engine", async () => (await enginePid(v.mp)) !== engine, {
        timeoutMs: 30_000,
      }).catch((e) => {
        throw new Error(
          `${e}; node plugin: ${h.node.stderr().slice(-4000)}; mounter: ${
            v.mp.mounter.stderr().slice(-2000)
          }`,
        );
      });
      await new Promise((r) => setTimeout(r, 2000));
    }

    const r = await workload.stop();
    const stops = kills.map((k) => k.at);
    assert.deepEqual(workloadErrors(r, stops), [], "the workload saw no error but lost writes");
    report(`engine-node writes open at a kill, EIO as documented: ${lostWrites(r, stops).length}`);
    const pauses = kills.map((k) => pauseAfter(r, k.at));
    kills.forEach((k, i) => report(`engine-node pause after ${k.how}: ${pauses[i]} ms`));
    assert.ok(pauses.every((p) => p !== undefined));
    report(`engine-node pause p99: ${percentile(pauses as number[], 99)} ms`);
    assert.equal(r.held.sha256, sha256(held), "the held file read through byte-identical");
    for (const [name, sum] of Object.entries(r.written)) {
      const o = await h.s3.send(new GetObjectCommand({ Bucket: h.bucket, Key: `k/a/${name}` }));
      assert.equal(sha256(await o.Body!.transformToByteArray()), sum, name);
    }
    assert.deepEqual(
      (await fuseMounts()).map((m) => m.majorMinor),
      before.map((m) => m.majorMinor),
      "the same kernel mounts throughout: never unmounted, never made again",
    );
    const stats = await h.csi.node.nodeGetVolumeStats({
      volumeId: v.volumeId,
      volumePath: v.target,
    });
    assert.equal(stats.volumeCondition?.abnormal, false);
  },
);
