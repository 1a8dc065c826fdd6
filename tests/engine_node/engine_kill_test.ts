/**
 * Killing the engine of a volume (mount-s3, SIGKILL) through node plugin → mounter on versitygw:
 * the same as with the fallback engine — the mounter reports it in `mount.error` and exits
 * non-zero (the pod restarts), NodeGetVolumeStats reports an abnormal VolumeCondition, and a
 * republish after the restart repairs the volume (a new source mount; the data is in S3).
 *
 * @module
 */
import assert from "node:assert/strict";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { writeSequential } from "../engine/_engine.ts";
import { engineNodeTest, enginePid, publishVolume, startEngineNode } from "./_engine_node.ts";

engineNodeTest(
  "killing mount-s3: abnormal VolumeCondition, mount.error, republish repairs",
  async () => {
    await using h = await startEngineNode();
    const v = await publishVolume(h, { flags: ["allow-delete"] });
    await writeSequential(`${v.target}/before.txt`, new TextEncoder().encode("before\n"));
    const pid = await enginePid(v.mp);
    // The engine got the FUSE fd and nothing else of ours (no socket, no credentials file).
    // deno-lint-ignore no-sync-fn-in-async-fn
    const fds = [...Deno.readDirSync(`/proc/${pid}/fd`)].map((e): [string, string] => {
      try {
        return [e.name, Deno.readLinkSync(`/proc/${pid}/fd/${e.name}`)];
      } catch {
        return [e.name, ""];
      }
    });
    assert.equal(fds.filter(([, l]) => l === "/dev/fuse").length, 1, JSON.stringify(fds));
    assert.equal(fds.filter(([, l]) => l.includes(h.root)).length, 0, JSON.stringify(fds));

    Deno.kill(pid, "SIGKILL");
    const status = await v.mp.mounter.child.status;
    assert.notEqual(status.code, 0, "the mounter exits non-zero so the pod restarts");
    assert.match(
      await Deno.readTextFile(`${v.mp.commDir}/mount.error`),
      /mount-s3 was killed by SIGKILL/,
    );
    const stats = await h.csi.node.nodeGetVolumeStats({
      volumeId: v.volumeId,
      volumePath: v.target,
    });
    assert.equal(stats.volumeCondition?.abnormal, true);
    assert.match(stats.volumeCondition?.message ?? "", /does not answer.*not connected/i);

    await h.restartMounter(v.mp); // kubelet restarts the container
    await h.csi.node.nodePublishVolume(v.request);
    assert.equal(await Deno.readTextFile(`${v.target}/before.txt`), "before\n");
    const healed = await h.csi.node.nodeGetVolumeStats({
      volumeId: v.volumeId,
      volumePath: v.target,
    });
    assert.equal(healed.volumeCondition?.abnormal, false);
    const fuse = (await readMountInfo()).filter((m) =>
      m.fsType === "fuse" && m.mountPoint.startsWith(h.root)
    );
    assert.equal(fuse.length, 2, "one new source and one bind, the dead ones are gone");
    assert.notEqual(await enginePid(v.mp), pid, "a new mount-s3 serves the volume");
  },
);
