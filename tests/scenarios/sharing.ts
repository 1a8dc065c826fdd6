/**
 * Mountpoint Pod sharing: two pods on one node using one PV with the same fsGroup share one
 * Mountpoint Pod and one FUSE mount (one kernel connection, two bind mounts); a pod with another
 * fsGroup, or a PV on the same bucket with other mount options, gets its own.
 *
 * @module
 */
import assert from "node:assert/strict";
import { sourceMountRoot } from "../../src/mppod/paths.ts";
import { type Scenario, unique } from "./cluster.ts";

/** The scenario. */
export const SHARING: Scenario = {
  name: "Mountpoint Pod sharing and separation",
  nodes: 1,
  async run(e, step) {
    await step(
      "same node + PV + fsGroup → one Mountpoint Pod, one FUSE mount; other fsGroup or mount options → separate",
      async () => {
        const node = e.nodeNames()[0]!;
        const bucket = await e.bucket("share");
        const vol = `share-${unique()}`;
        const vol2 = `share-opts-${unique()}`;
        await e.staticVolume(vol, { bucket });
        await e.staticVolume(vol2, {
          bucket,
          mountOptions: ["allow-delete", "allow-overwrite", "region us-east-1"],
        });
        const names: string[] = [];
        const start = async (prefix: string, claim: string, script: string, fsGroup = 1000) => {
          const pod = await e.pod({
            name: `${prefix}-${unique()}`,
            node,
            volumes: [{ claim, mountPath: "/data" }],
            fsGroup,
            script: `set -e; ${script}; echo READY; exec sleep 300`,
          });
          names.push(pod.metadata.name);
          await e.waitLog(pod, "READY");
          return pod;
        };
        try {
          const a = await start("share-a", vol, "echo shared > /data/a.txt");
          const b = await start("share-b", vol, "cat /data/a.txt");
          assert.match(await e.log(b), /shared/, "B reads what A wrote");
          const mpA = await e.mountpointPodOf(a);
          const mpB = await e.mountpointPodOf(b);
          assert.ok(mpA, "A has a Mountpoint Pod");
          assert.equal(mpB, mpA, "B shares A's Mountpoint Pod");
          assert.equal((await e.mountpointPods()).length, 1);
          assert.equal((await e.s3pas()).length, 1);
          const root = sourceMountRoot(e.kubeletRoot(node));
          let fuse = await e.fuseMounts();
          assert.equal(
            fuse.filter((m) => m.mountPoint.startsWith(`${root}/`)).length,
            1,
            "one source",
          );
          assert.equal(new Set(fuse.map((m) => m.majorMinor)).size, 1, "one FUSE connection");
          assert.equal(fuse.length, 3, "source + two bind mounts");

          const c = await start("share-c", vol, "ls /data", 2000);
          const mpC = await e.mountpointPodOf(c);
          assert.ok(mpC && mpC !== mpA, "another fsGroup → another Mountpoint Pod");
          const d = await start("share-d", vol2, "ls /data");
          const mpD = await e.mountpointPodOf(d);
          assert.ok(
            mpD && mpD !== mpA && mpD !== mpC,
            "other mount options → another Mountpoint Pod",
          );
          assert.equal((await e.mountpointPods()).length, 3);
          fuse = await e.fuseMounts();
          assert.equal(new Set(fuse.map((m) => m.majorMinor)).size, 3, "three FUSE connections");
          assert.equal(fuse.filter((m) => m.mountPoint.startsWith(`${root}/`)).length, 3);

          await e.deletePod(a.metadata.name);
          assert.equal(await e.mountpointPodOf(b), mpA, "B keeps the shared Mountpoint Pod");
          assert.ok(
            (await e.mountpointPods()).some((p) => p.metadata.name === mpA),
            "the shared Mountpoint Pod stays while B uses it",
          );
          for (const n of names) await e.deletePod(n);
          await e.waitReleased();
          assert.deepEqual(await e.fuseMounts(), []);
        } finally {
          for (const n of names) await e.deletePod(n).catch(() => {});
          await e.dropVolume(vol);
          await e.dropVolume(vol2);
          await e.dropBucket(bucket);
        }
      },
    );
  },
};
