/**
 * Static provisioning: a PV naming a pre-created bucket, a pod that writes through the mount, and
 * the object in S3; data put through S3 is visible in the mount; deleting the pod releases the
 * Mountpoint Pod and its mount.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Scenario, unique } from "./cluster.ts";

/** The scenario. */
export const STATIC_PROVISIONING: Scenario = {
  name: "static provisioning",
  nodes: 1,
  async run(e, step) {
    await step("a pod writes through a static PV; the object is in S3", async () => {
      const bucket = await e.bucket("static");
      await e.put(bucket, "from-s3.txt", "put through the S3 API\n");
      const vol = `static-${unique()}`;
      await e.staticVolume(vol, { bucket });
      try {
        const out = await e.run({
          name: `writer-${unique()}`,
          volumes: [{ claim: vol, mountPath: "/data" }],
          script: "set -e; echo 'written by the pod' > /data/out.txt; mkdir -p /data/sub; " +
            "echo nested > /data/sub/n.txt; cat /data/from-s3.txt; ls /data",
        });
        assert.match(out, /put through the S3 API/, "the pod reads what S3 holds");
        assert.equal(await e.get(bucket, "out.txt"), "written by the pod\n");
        assert.equal(await e.get(bucket, "sub/n.txt"), "nested\n");
        await e.waitReleased();
        assert.deepEqual(await e.fuseMounts(), [], "no FUSE mount once the pod is gone");
      } finally {
        await e.dropVolume(vol);
        await e.dropBucket(bucket);
      }
    });
  },
};
