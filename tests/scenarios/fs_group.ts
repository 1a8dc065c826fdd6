/**
 * fsGroup: files and directories of the mount belong to the pod's fsGroup and are group-writable,
 * so another user of the same fsGroup can read and write them.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Scenario, unique } from "./cluster.ts";

/** The scenario. */
export const FS_GROUP: Scenario = {
  name: "fsGroup",
  nodes: 1,
  async run(e, step) {
    await step("files are owned by the fsGroup gid and group-writable", async () => {
      const bucket = await e.bucket("fsgroup");
      await e.put(bucket, "from-s3.txt", "seed\n");
      const vol = `fsg-${unique()}`;
      await e.staticVolume(vol, { bucket });
      try {
        const out = await e.run({
          name: `fsg-a-${unique()}`,
          volumes: [{ claim: vol, mountPath: "/data" }],
          runAsUser: 1000,
          runAsGroup: 1000,
          fsGroup: 2345,
          script:
            "set -e; echo mine > /data/f.txt; mkdir /data/d; echo x > /data/d/x.txt; echo GROUPS $(id -G); " +
            "stat -c 'STAT %n %g %a' /data/f.txt /data/d /data/from-s3.txt /data",
        });
        assert.match(out, /GROUPS .*\b2345\b/, "the pod runs with the fsGroup");
        assert.match(out, /STAT \S*\/f\.txt 2345 660/);
        assert.match(out, /STAT \S*\/d 2345 770/);
        assert.match(out, /STAT \S*\/from-s3\.txt 2345 660/);
        // Another user, same fsGroup: group permissions suffice to read and write.
        const other = await e.run({
          name: `fsg-b-${unique()}`,
          volumes: [{ claim: vol, mountPath: "/data" }],
          runAsUser: 3001,
          runAsGroup: 3001,
          fsGroup: 2345,
          script: "set -e; cat /data/f.txt; echo theirs > /data/d/g.txt; echo WROTE",
        });
        assert.match(other, /mine\n/);
        assert.match(other, /WROTE/);
        assert.equal(await e.get(bucket, "d/g.txt"), "theirs\n");
      } finally {
        await e.dropVolume(vol);
        await e.dropBucket(bucket);
      }
    });
  },
};
