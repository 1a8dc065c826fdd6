/**
 * Read-only volumes: a PVC used with `readOnly: true`, and a PV whose access mode is ReadOnlyMany;
 * reads work, writes fail with EROFS ("Read-only file system") and nothing reaches S3.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Scenario, unique } from "./cluster.ts";

const SCRIPT = "cat /data/seed.txt; " +
  "if echo x > /data/new.txt; then echo WRITE-OK; else echo WRITE-FAILED; fi; " +
  "if mkdir /data/newdir; then echo MKDIR-OK; else echo MKDIR-FAILED; fi; " +
  "if rm /data/seed.txt; then echo RM-OK; else echo RM-FAILED; fi; " +
  "grep \" $(realpath /data) \" /proc/self/mountinfo | cut -d' ' -f5,6";

function assertReadOnly(out: string, target: string): void {
  assert.match(out, /seed content/, `reads work: ${out}`);
  assert.match(out, /WRITE-FAILED/, out);
  assert.match(out, /MKDIR-FAILED/, out);
  assert.match(out, /RM-FAILED/, out);
  assert.match(out, /Read-only file system/, `the error is EROFS: ${out}`);
  assert.match(out, new RegExp(`${target} ro[,\\s]`), `the target is mounted ro: ${out}`);
}

/** The scenario. */
export const READ_ONLY: Scenario = {
  name: "read-only volumes",
  nodes: 1,
  async run(e, step) {
    const bucket = await e.bucket("readonly");
    await e.put(bucket, "seed.txt", "seed content\n");
    try {
      await step("PVC readOnly: reads work, writes fail with EROFS", async () => {
        const vol = `ro-pvc-${unique()}`;
        await e.staticVolume(vol, { bucket });
        try {
          const out = await e.run({
            name: `ro-pvc-${unique()}`,
            volumes: [{ claim: vol, mountPath: "/data", readOnly: true }],
            script: SCRIPT,
          });
          assertReadOnly(out, "\\S+");
          assert.deepEqual(await e.keys(bucket), ["seed.txt"], "nothing written, nothing deleted");
        } finally {
          await e.dropVolume(vol);
        }
      });

      await step("ReadOnlyMany access mode: reads work, writes fail with EROFS", async () => {
        const vol = `ro-rox-${unique()}`;
        await e.staticVolume(vol, { bucket, accessModes: ["ReadOnlyMany"] });
        try {
          const out = await e.run({
            name: `ro-rox-${unique()}`,
            volumes: [{ claim: vol, mountPath: "/data" }],
            script: SCRIPT,
          });
          assertReadOnly(out, "\\S+");
          assert.deepEqual(await e.keys(bucket), ["seed.txt"]);
        } finally {
          await e.dropVolume(vol);
        }
      });

      await step("a read-write pod next to it still writes", async () => {
        const vol = `ro-rw-${unique()}`;
        await e.staticVolume(vol, { bucket });
        try {
          const out = await e.run({
            name: `rw-${unique()}`,
            volumes: [{ claim: vol, mountPath: "/data" }],
            script: "echo rw > /data/rw.txt && echo WRITE-OK",
          });
          assert.match(out, /WRITE-OK/);
          assert.equal(await e.get(bucket, "rw.txt"), "rw\n");
        } finally {
          await e.dropVolume(vol);
        }
      });
    } finally {
      await e.dropBucket(bucket);
    }
  },
};
