/**
 * The engine's local cache on the Mountpoint Pod's cache volume (volume attributes
 * `cache: emptyDir` + `cacheEmptyDirSizeLimit`), through node plugin → mounter → mount-s3 on
 * versitygw: the engine gets `--cache` in the pod's cache volume (never the comm or work dir)
 * and a `--max-cache-size` of 95 % of the limit; reading more than the limit fills the cache
 * volume with blocks and never beyond the limit; a Mountpoint Pod without the cache volume is
 * refused before anything is mounted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { fileSha256, sha256, testBytes } from "../testbed/harness/engine.ts";
import { dirUsage, listTree } from "../_helpers.ts";
import {
  cmdline,
  engineNodeTest,
  enginePid,
  publishVolume,
  startEngineNode,
} from "../testbed/harness/engine_node.ts";

const MIB = 1024 * 1024;

engineNodeTest("cache files land in the cache volume and stay within its size limit", async () => {
  await using h = await startEngineNode();
  const limit = 64 * MIB;
  const objects = [0, 1, 2].map((i) => ({
    key: `big-${i}.bin`,
    bytes: testBytes(40 * MIB, 20 + i),
  }));
  for (const o of objects) {
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: o.key, Body: o.bytes }));
  }
  const v = await publishVolume(h, {
    flags: ["allow-delete"],
    context: { cache: "emptyDir", cacheEmptyDirSizeLimit: "64Mi" },
    pod: { cache: { sizeLimit: "64Mi" } },
  });
  const cacheDir = v.mp.cacheDir!;
  const args = await cmdline(await enginePid(v.mp));
  assert.ok(args.includes(`--cache=${cacheDir}`), args.join(" "));
  assert.ok(args.includes("--max-cache-size=60"), `95 % of 64 MiB: ${args.join(" ")}`);

  // 120 MiB read twice through a 64 MiB cache.
  let peak = 0;
  for (let round = 0; round < 2; round++) {
    for (const o of objects) {
      assert.equal(await fileSha256(`${v.target}/${o.key}`), sha256(o.bytes), o.key);
      peak = Math.max(peak, (await dirUsage(cacheDir)).bytes);
    }
  }
  const used = await dirUsage(`${cacheDir}/mountpoint-cache`);
  assert.ok(used.files > 0 && used.bytes > 0, "the engine cached blocks in the cache volume");
  assert.ok(peak <= limit, `cache volume used ${peak} bytes, over its ${limit} limit`);
  // Nothing of the cache in the comm dir (memory-backed, shared with the node plugin) or the
  // work dir.
  for (const dir of [v.mp.commDir, v.mp.commDir.replace(/\/comm$/, "/work")]) {
    const names = await listTree(dir);
    assert.ok(!names.some((n) => /cache/.test(n)), `${dir}: ${names.join(" ")}`);
  }
});

engineNodeTest(
  "a volume asking for a cache on a Mountpoint Pod without one is refused",
  async () => {
    await using h = await startEngineNode();
    const err = await publishVolume(h, {
      flags: ["allow-delete"],
      context: { cache: "emptyDir", cacheEmptyDirSizeLimit: "64Mi" },
    }).then(() => undefined, (e: { code?: number; details?: string }) => e);
    assert.ok(err, "the publish must fail");
    assert.equal(err.code, 9, err.details ?? "");
    assert.match(err.details ?? "", /asks for a local cache .* has no "cache" volume/);
    assert.deepEqual(await h.ourMounts(), [], "nothing mounted");
  },
);
