/**
 * Data through a volume: node plugin → mounter → our mount-s3 on real FUSE, on versitygw. Files of
 * 0 B, 1 B, 5 MiB+1 and 300 MiB written through the workload's target path read back
 * byte-identical with the SDK; objects uploaded with the SDK read through the volume; an object
 * another client uploads is listed within the volume's metadata TTL.
 *
 * @module
 */
import assert from "node:assert/strict";
import { HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import {
  assertReadThrough,
  objectSha256,
  putSdkObjects,
  sha256,
  testBytes,
  writeSequential,
} from "../testbed/harness/engine.ts";
import {
  cmdline,
  engineNodeTest,
  enginePid,
  publishVolume,
  startEngineNode,
} from "../testbed/harness/engine_node.ts";

const MIB = 1024 * 1024;

engineNodeTest(
  "files of 0 B, 1 B, 5 MiB+1 and 300 MiB written through a volume read back byte-identical with the SDK",
  async () => {
    await using h = await startEngineNode();
    const v = await publishVolume(h, { flags: ["allow-delete"] });
    // The volume really runs on mount-s3, on the FUSE fd the node plugin passed.
    const args = await cmdline(await enginePid(v.mp));
    assert.match(args[0]!, /mount-s3$/);
    assert.equal(args[1], h.bucket);
    assert.match(args[2]!, /^\/dev\/fd\/\d+$/);
    for (
      const [label, size] of [["0B", 0], ["1B", 1], ["5MiB+1", 5 * MIB + 1], [
        "300MiB",
        300 * MIB,
      ]] as const
    ) {
      const bytes = testBytes(size, size + 3);
      await writeSequential(`${v.target}/${label}.bin`, bytes);
      assert.equal((await Deno.stat(`${v.target}/${label}.bin`)).size, size, label);
      const head = await h.s3.send(
        new HeadObjectCommand({ Bucket: h.bucket, Key: `${label}.bin` }),
      );
      assert.equal(head.ContentLength, size, label);
      assert.equal(await objectSha256(h.s3, h.bucket, `${label}.bin`), sha256(bytes), label);
    }
  },
);

engineNodeTest("objects uploaded with the SDK read through the volume byte-identical", async () => {
  await using h = await startEngineNode();
  const objects = await putSdkObjects(h.s3, h.bucket);
  const v = await publishVolume(h, { mode: "MULTI_NODE_READER_ONLY" });
  await assertReadThrough(v.target, objects);
});

engineNodeTest("an object another client uploads is listed within the metadata TTL", async () => {
  await using h = await startEngineNode();
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "before.txt", Body: "a" }));
  const ttlSeconds = 2;
  const v = await publishVolume(h, { flags: [`metadata-ttl=${ttlSeconds}`] });
  const list = async () => {
    const names: string[] = [];
    for await (const e of Deno.readDir(v.target)) names.push(e.name);
    return names.sort();
  };
  assert.deepEqual(await list(), ["before.txt"]);
  // A cached negative lookup, which the TTL must also expire.
  await assert.rejects(Deno.stat(`${v.target}/after.txt`), Deno.errors.NotFound);
  const uploaded = Date.now();
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "after.txt", Body: "bb" }));
  let listed = -1;
  let found = -1;
  const deadline = uploaded + ttlSeconds * 1000 + 5_000; // TTL + slack for a busy machine
  while (Date.now() < deadline && (listed < 0 || found < 0)) {
    if (listed < 0 && (await list()).includes("after.txt")) listed = Date.now() - uploaded;
    if (found < 0 && (await Deno.stat(`${v.target}/after.txt`).catch(() => undefined))) {
      found = Date.now() - uploaded;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(listed >= 0, `after.txt not listed within ${ttlSeconds} s + 5 s`);
  assert.ok(found >= 0, `after.txt not found by stat within ${ttlSeconds} s + 5 s`);
  assert.equal(await Deno.readTextFile(`${v.target}/after.txt`), "bb");
});
