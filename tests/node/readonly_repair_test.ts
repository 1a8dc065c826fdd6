/**
 * Read-only volumes and repair of a dead mount, on the real kernel with RGW (run as root).
 */
import assert from "node:assert/strict";
import { findMount, readMountInfo } from "../../src/sys/mountinfo.ts";
import { runToEnd, waitFor } from "../_helpers.ts";
import { kubeletMkdirParent, nodeTest, startHarness } from "../testbed/harness/node_harness.ts";

async function assertErofs(path: string): Promise<void> {
  await assert.rejects(
    Deno.writeTextFile(path, "nope"),
    (e: unknown) => e instanceof Error && /os error 30|Read-only/.test(e.message),
  );
}

nodeTest("read-only volume (reader-only access mode) and read-only bind give EROFS", async () => {
  await using h = await startHarness();
  const ro = await h.mountpointPod("mp-ro");
  await h.assign("pv-ro", "vol-pv-ro", ro.name, ["uid-r"]);
  const tr = h.target("uid-r", "pv-ro");
  await kubeletMkdirParent(tr);
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-r", "pv-ro", {
    volumeCapability: { mount: {}, accessMode: { mode: "MULTI_NODE_READER_ONLY" } },
  }));
  await Deno.readDir(tr)[Symbol.asyncIterator]().next(); // readable
  await assertErofs(`${tr}/x.txt`);
  const mounts = await readMountInfo();
  const source = findMount(mounts, `${h.root}/plugins/s3.csi.scality.com/mnt/${ro.name}`)!;
  assert.ok(source.mountOptions.includes("ro"), "the FUSE source itself is read-only");
  assert.ok(findMount(mounts, tr)!.mountOptions.includes("nodev"));

  // A read-only bind of a read-write source (the pod's volume has readOnly: true).
  const rw = await h.mountpointPod("mp-rw");
  await h.assign("pv-rw", "vol-pv-rw", rw.name, ["uid-w", "uid-v"]);
  const [tw, tv] = [h.target("uid-w", "pv-rw"), h.target("uid-v", "pv-rw")];
  await kubeletMkdirParent(tw);
  await kubeletMkdirParent(tv);
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-w", "pv-rw"));
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-v", "pv-rw", { readonly: true }));
  await Deno.writeTextFile(`${tw}/w.txt`, "rw\n");
  assert.equal(await Deno.readTextFile(`${tv}/w.txt`), "rw\n");
  await assertErofs(`${tv}/v.txt`);
  const bind = findMount(await readMountInfo(), tv)!;
  assert.deepEqual(
    ["ro", "nosuid", "nodev"].filter((o) => bind.mountOptions.includes(o)),
    ["ro", "nosuid", "nodev"],
    "read-only bind keeps nosuid,nodev",
  );
});

nodeTest("killing the engine: stats report abnormal, a republish repairs the volume", async () => {
  await using h = await startHarness();
  const mp = await h.mountpointPod("mp-kill");
  await h.assign("pv-k", "vol-pv-k", mp.name, ["uid-k"]);
  const t = h.target("uid-k", "pv-k");
  await kubeletMkdirParent(t);
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-k", "pv-k"));
  await Deno.writeTextFile(`${t}/before.txt`, "before\n");

  const mounterPid = mp.mounter.child.pid;
  const rclone = await waitFor("the rclone process", async () => {
    const r = await runToEnd("pgrep", ["-f", "-P", String(mounterPid), "rclone"]);
    return r.stdout.trim().split("\n")[0] || undefined;
  });
  // The engine got the FUSE fd and nothing else of ours (no socket, no credentials file).
  const cmdline = (await Deno.readTextFile(`/proc/${rclone}/cmdline`)).split("\0");
  const fdArg = cmdline.find((a) => a.startsWith("/dev/fd/"))!;
  // deno-lint-ignore no-sync-fn-in-async-fn
  const fds = [...Deno.readDirSync(`/proc/${rclone}/fd`)].map((e): [string, string] => {
    try {
      return [e.name, Deno.readLinkSync(`/proc/${rclone}/fd/${e.name}`)];
    } catch {
      return [e.name, ""];
    }
  });
  assert.deepEqual(fds.filter(([, l]) => l === "/dev/fuse").map(([n]) => n), [fdArg.slice(8)]);
  assert.equal(fds.filter(([, l]) => l.includes(h.root)).length, 0, JSON.stringify(fds));
  Deno.kill(Number(rclone), "SIGKILL");
  const status = await mp.mounter.child.status;
  assert.notEqual(status.code, 0, "the mounter exits non-zero so the pod restarts");
  assert.match(
    await Deno.readTextFile(`${mp.commDir}/mount.error`),
    /rclone was killed by SIGKILL/,
  );

  const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: "vol-pv-k", volumePath: t });
  assert.equal(stats.volumeCondition?.abnormal, true);
  assert.match(stats.volumeCondition?.message ?? "", /does not answer.*not connected/i);

  await h.restartMounter(mp); // kubelet restarts the container
  await h.csi.node.nodePublishVolume(h.publishRequest("uid-k", "pv-k"));
  assert.equal(await Deno.readTextFile(`${t}/before.txt`), "before\n");
  const healed = await h.csi.node.nodeGetVolumeStats({ volumeId: "vol-pv-k", volumePath: t });
  assert.equal(healed.volumeCondition?.abnormal, false);
  const fuse = (await readMountInfo()).filter((m) =>
    m.fsType === "fuse" && m.mountPoint.startsWith(h.root)
  );
  assert.equal(fuse.length, 2, "one new source and one bind, the dead ones are gone");
});
