/**
 * The local data cache of our mount-s3: `--cache=<dir>` puts object blocks under
 * `<dir>/mountpoint-cache`, `--max-cache-size` (MiB) bounds them, cached reads stay correct, and the
 * cache is removed when the file system is unmounted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import {
  assertNoLeftoverMounts,
  engineTest,
  fileSha256,
  fuseReason,
  mountEngine,
  s3Client,
  sha256,
  startVersitygw,
  tempBucket,
  testBytes,
  versitygwReason,
} from "../testbed/harness/engine.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";

const reason = fuseReason() ?? versitygwReason();
const MIB = 1024 * 1024;

/** Files and total bytes under `dir`. */
async function usage(dir: string): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.isFile) {
        files++;
        bytes += (await Deno.stat(p)).size;
      }
    }
  };
  await walk(dir).catch(() => {});
  return { files, bytes };
}

/** Remove a cache parent we made, never across a mount. */
async function removeCacheParent(dir: string): Promise<void> {
  if ((await readMountInfo()).some((m) => m.mountPoint.startsWith(dir))) {
    throw new Error(`something is mounted under ${dir}; not removing it`);
  }
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}

engineTest(
  "engine: cache files appear in the cache dir and respect --max-cache-size",
  reason,
  async () => {
    await using server = await startVersitygw();
    const s3 = await s3Client(server);
    const cacheParent = await Deno.makeTempDir({ prefix: "s3csi-engine-cache-" });
    try {
      await using bucket = await tempBucket(s3);
      const objects = [0, 1, 2].map((i) => ({
        key: `obj${i}`,
        bytes: testBytes(16 * MIB, 100 + i),
      }));
      for (const o of objects) {
        await s3.send(new PutObjectCommand({ Bucket: bucket.name, Key: o.key, Body: o.bytes }));
      }
      const limitMib = 20;
      const cacheDir = `${cacheParent}/mountpoint-cache`;
      {
        await using m = await mountEngine({
          bucket: bucket.name,
          server,
          args: [`--cache=${cacheParent}`, `--max-cache-size=${limitMib}`, "--read-only"],
        });
        for (const o of objects) {
          assert.equal(
            await fileSha256(`${m.dir}/${o.key}`),
            sha256(o.bytes),
          );
        }
        const after = await usage(cacheDir);
        assert.ok(after.files > 0, "no cache files");
        // 48 MiB read, at most the limit kept (blocks are 1 MiB plus a small header).
        assert.ok(after.bytes <= (limitMib + 2) * MIB, `cache holds ${after.bytes} bytes`);
        assert.ok(after.bytes >= 4 * MIB, `cache holds only ${after.bytes} bytes`);
        // Reads served partly from the cache are still right.
        for (const o of objects) {
          assert.equal(
            await fileSha256(`${m.dir}/${o.key}`),
            sha256(o.bytes),
          );
        }
        assert.ok((await usage(cacheDir)).bytes <= (limitMib + 2) * MIB);
        assert.equal(await m.unmount(), 0);
      }
      assert.equal((await usage(cacheDir)).files, 0, "cache left after unmount");
      // Without a limit everything read stays cached (so the limit above did the bounding).
      {
        await using m = await mountEngine({
          bucket: bucket.name,
          server,
          args: [`--cache=${cacheParent}`, "--read-only"],
        });
        for (const o of objects) {
          assert.equal(
            await fileSha256(`${m.dir}/${o.key}`),
            sha256(o.bytes),
          );
        }
        const unbounded = await usage(cacheDir);
        assert.ok(unbounded.bytes >= 48 * MIB, `unbounded cache holds ${unbounded.bytes} bytes`);
        assert.equal(await m.unmount(), 0);
      }
    } finally {
      s3.closeAll();
      await removeCacheParent(cacheParent);
      await assertNoLeftoverMounts();
    }
  },
);

engineTest("engine: a missing cache directory fails the start with exit 3", reason, async () => {
  await using server = await startVersitygw();
  const s3 = await s3Client(server);
  try {
    await using bucket = await tempBucket(s3);
    const err = await mountEngine({
      bucket: bucket.name,
      server,
      args: ["--cache=/nonexistent/s3csi-cache"],
    }).then(() => undefined, (e) => e);
    assert.match(
      String(err),
      /exited with 3: mount-s3: error: cache directory \/nonexistent\/s3csi-cache/,
    );
  } finally {
    s3.closeAll();
    await assertNoLeftoverMounts();
  }
});
