/**
 * What a volume's options mean, through node plugin → mounter → mount-s3 on versitygw: without
 * `allow-delete` `rm` fails with EPERM and the object stays; without `allow-overwrite` an
 * overwrite fails (each next to the same operation succeeding with the option); `read-only` gives
 * EROFS; `uid`/`gid`/modes (and an fsGroup) are what `stat` shows; `prefix` confines the view; and
 * a volume on the rclone fallback without `allow-delete`/`allow-overwrite` is refused in
 * NodePublishVolume with the engine named, before anything is mounted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { kubeletMkdirParent } from "../testbed/harness/node_harness.ts";
import { runToEnd } from "../_helpers.ts";
import { writeSequential } from "../testbed/harness/engine.ts";
import { engineNodeTest, publishVolume, startEngineNode } from "../testbed/harness/engine_node.ts";

const EPERM = /os error 1\b|Operation not permitted/;
const EROFS = /os error 30\b|Read-only file system/;

async function body(h: { s3: import("@aws-sdk/client-s3").S3Client; bucket: string }, key: string) {
  const r = await h.s3.send(new GetObjectCommand({ Bucket: h.bucket, Key: key }));
  return await r.Body!.transformToString();
}

/** Overwrite a file like `echo x > f` (open with O_TRUNC, write, close). */
function overwrite(path: string, text: string): void {
  using f = Deno.openSync(path, { write: true, truncate: true });
  f.writeSync(new TextEncoder().encode(text));
}

engineNodeTest("without allow-delete rm fails with EPERM and the object stays", async () => {
  await using h = await startEngineNode();
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "keep.txt", Body: "keep" }));
  const v = await publishVolume(h, { flags: [] });
  const rm = await runToEnd("rm", ["-f", `${v.target}/keep.txt`]);
  assert.notEqual(rm.code, 0, "rm must fail");
  assert.match(rm.stderr, /Operation not permitted/);
  await assert.rejects(Deno.remove(`${v.target}/keep.txt`), EPERM);
  assert.equal(await body(h, "keep.txt"), "keep", "the object stays");

  // The same with allow-delete: deleted, in S3 too.
  const w = await publishVolume(h, { flags: ["allow-delete"] });
  await Deno.remove(`${w.target}/keep.txt`);
  await assert.rejects(
    h.s3.send(new HeadObjectCommand({ Bucket: h.bucket, Key: "keep.txt" })),
    (e: unknown) => (e as { name?: string }).name === "NotFound",
  );
});

engineNodeTest(
  "without allow-overwrite an overwrite fails and the object is unchanged",
  async () => {
    await using h = await startEngineNode();
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "v.txt", Body: "one" }));
    const v = await publishVolume(h, { flags: ["allow-delete"] });
    assert.throws(() => overwrite(`${v.target}/v.txt`, "two"), EPERM);
    const sh = await runToEnd("sh", ["-c", `echo two > ${v.target}/v.txt`]);
    assert.notEqual(sh.code, 0, `sh overwrite must fail: ${sh.stderr}`);
    assert.equal(await body(h, "v.txt"), "one");

    const w = await publishVolume(h, { flags: ["allow-delete", "allow-overwrite"] });
    overwrite(`${w.target}/v.txt`, "two");
    assert.equal(await body(h, "v.txt"), "two", "with allow-overwrite the overwrite lands");
  },
);

engineNodeTest(
  "read-only volumes give EROFS (read-only option and reader-only access mode)",
  async () => {
    await using h = await startEngineNode();
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "r.txt", Body: "r" }));
    for (
      const o of [
        { flags: ["read-only"] },
        { flags: ["allow-delete"], mode: "MULTI_NODE_READER_ONLY" as const },
      ]
    ) {
      const v = await publishVolume(h, o);
      assert.equal(await Deno.readTextFile(`${v.target}/r.txt`), "r");
      assert.throws(
        () => Deno.openSync(`${v.target}/new.txt`, { write: true, createNew: true }),
        EROFS,
      );
      assert.throws(() => Deno.mkdirSync(`${v.target}/d`), EROFS);
      assert.throws(() => Deno.removeSync(`${v.target}/r.txt`), EROFS);
      assert.equal(await body(h, "r.txt"), "r");
    }
  },
);

engineNodeTest("uid, gid and modes (and a workload fsGroup) are what stat shows", async () => {
  await using h = await startEngineNode();
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "d/f.txt", Body: "f" }));
  const v = await publishVolume(h, {
    flags: ["uid=2001", "gid=3001", "dir-mode=0750", "file-mode=0640"],
  });
  const f = await Deno.stat(`${v.target}/d/f.txt`);
  const d = await Deno.stat(`${v.target}/d`);
  assert.deepEqual([f.uid, f.gid, f.mode! & 0o777], [2001, 3001, 0o640]);
  assert.deepEqual([d.uid, d.gid, d.mode! & 0o777], [2001, 3001, 0o750]);

  const g = await publishVolume(h, { flags: ["allow-delete"], volumeMountGroup: "4000" });
  const gf = await Deno.stat(`${g.target}/d/f.txt`);
  const gd = await Deno.stat(`${g.target}/d`);
  assert.deepEqual([gf.gid, gf.mode! & 0o777], [4000, 0o660]);
  assert.deepEqual([gd.gid, gd.mode! & 0o777], [4000, 0o770]);
});

engineNodeTest("prefix confines the view and the writes", async () => {
  await using h = await startEngineNode();
  for (const key of ["team-a/in.txt", "team-b/out.txt", "root.txt"]) {
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: key, Body: key }));
  }
  const v = await publishVolume(h, { flags: ["allow-delete"], context: { prefix: "team-a/" } });
  const names: string[] = [];
  for await (const e of Deno.readDir(v.target)) names.push(e.name);
  assert.deepEqual(names, ["in.txt"]);
  assert.equal(await Deno.readTextFile(`${v.target}/in.txt`), "team-a/in.txt");
  await assert.rejects(Deno.stat(`${v.target}/../team-b`));
  await writeSequential(`${v.target}/new.txt`, new TextEncoder().encode("new"));
  assert.equal(await body(h, "team-a/new.txt"), "new", "writes land under the prefix");
});

engineNodeTest(
  "rclone without allow-delete or allow-overwrite is refused naming the engine; nothing is mounted",
  async () => {
    await using h = await startEngineNode();
    const mp = await h.mountpointPod("mp-rclone");
    await h.assign("pv-rc", "vol-pv-rc", mp.name, ["uid-rc"]);
    const target = h.target("uid-rc", "pv-rc");
    await kubeletMkdirParent(target);
    for (
      const [flags, re] of [
        [["allow-delete"], /rclone engine cannot refuse overwrites/],
        [["allow-overwrite"], /rclone engine cannot refuse deletes/],
        [[], /rclone engine cannot refuse deletes or overwrites/],
      ] as const
    ) {
      await assert.rejects(
        h.csi.node.nodePublishVolume({
          volumeId: "vol-pv-rc",
          targetPath: target,
          volumeCapability: {
            mount: { mountFlags: [...flags] },
            accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
          },
          volumeContext: {
            bucketName: h.bucket,
            engine: "rclone",
            "csi.storage.k8s.io/pod.uid": "uid-rc",
          },
        }),
        (e: { code?: number; details?: string }) =>
          e.code === 3 && re.test(e.details ?? "") &&
          /use the mount-s3 engine/.test(e.details ?? ""),
      );
    }
    assert.deepEqual(await h.ourMounts(), [], "nothing mounted");
    assert.equal(
      await Deno.stat(`${mp.commDir}/mount.sock`).then(() => true, () => false),
      true,
      "the mounter never got a message",
    );
  },
);
