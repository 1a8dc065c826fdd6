/**
 * Upstream Mountpoint's options as a volume sets them, through node plugin → mounter → mount-s3
 * on versitygw: `no-sign-request` mounts a public bucket and the Mountpoint Pod gets no
 * credentials at all; `allow-root` is honoured (root reads, another user is refused) where the
 * default admits every user; upstream's forms (`-f`, `-d`) and the new options reach the engine
 * as the volume gave them, the volume's user agent before the driver's, and a write with
 * crc64nvme checksums and an inferred Content-Type lands.
 *
 * @module
 */
import assert from "node:assert/strict";
import { HeadObjectCommand, PutBucketPolicyCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { bindMount, unmount } from "../../src/sys/mount.ts";
import { runToEnd } from "../_helpers.ts";
import { writeSequential } from "../testbed/harness/engine.ts";
import {
  cmdline,
  engineNodeTest,
  enginePid,
  environ,
  publishVolume,
  startEngineNode,
} from "../testbed/harness/engine_node.ts";

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

engineNodeTest(
  "no-sign-request mounts a public bucket; the Mountpoint Pod gets no credentials",
  async () => {
    await using h = await startEngineNode();
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "pub.txt", Body: "public" }));
    await h.s3.send(
      new PutBucketPolicyCommand({
        Bucket: h.bucket,
        Policy: JSON.stringify({
          Version: "2012-10-17",
          Statement: [{
            Effect: "Allow",
            Principal: "*",
            Action: ["s3:GetObject", "s3:ListBucket"],
            Resource: [`arn:aws:s3:::${h.bucket}`, `arn:aws:s3:::${h.bucket}/*`],
          }],
        }),
      }),
    );
    const v = await publishVolume(h, {
      flags: ["no-sign-request"],
      mode: "MULTI_NODE_READER_ONLY",
    });
    assert.equal(await Deno.readTextFile(`${v.target}/pub.txt`), "public");
    const pid = await enginePid(v.mp);
    assert.ok((await cmdline(pid)).includes("--no-sign-request"));
    const env = await environ(pid);
    for (const k of ["AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ACCESS_KEY_ID"]) {
      assert.equal(env[k], undefined, `${k} reached the engine`);
    }
    assert.equal(await exists(`${v.mp.commDir}/credentials`), false, "credentials in the comm dir");
    // Control: the same bucket through a signed volume gets the driver's credentials.
    const signed = await publishVolume(h, { mode: "MULTI_NODE_READER_ONLY" });
    assert.ok(await exists(`${signed.mp.commDir}/credentials/s3-csi-credentials`));
  },
);

/** `cat path` as uid 2000 through a bind mount in a place every user may traverse. */
async function catAsOther(target: string, file: string): Promise<{ code: number; stderr: string }> {
  const view = await Deno.makeTempDir({ prefix: "s3csi-options-view-" });
  await Deno.chmod(view, 0o755);
  bindMount(target, view);
  try {
    const r = await runToEnd("setpriv", [
      "--reuid=2000",
      "--regid=2000",
      "--clear-groups",
      "cat",
      `${view}/${file}`,
    ]);
    return { code: r.code, stderr: r.stderr };
  } finally {
    unmount(view, { detach: true });
    await Deno.remove(view);
  }
}

engineNodeTest("allow-root admits root only; the default admits every user", async () => {
  await using h = await startEngineNode();
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "f.txt", Body: "data" }));
  const rootOnly = await publishVolume(h, { flags: ["allow-root"] });
  const args = await cmdline(await enginePid(rootOnly.mp));
  assert.ok(args.includes("--allow-root") && !args.includes("--allow-other"), args.join(" "));
  assert.equal(await Deno.readTextFile(`${rootOnly.target}/f.txt`), "data", "root reads");
  const refused = await catAsOther(rootOnly.target, "f.txt");
  assert.notEqual(refused.code, 0, "uid 2000 read a root-only volume");
  assert.match(refused.stderr, /Permission denied/);

  const everyone = await publishVolume(h, {});
  assert.ok((await cmdline(await enginePid(everyone.mp))).includes("--allow-other"));
  const read = await catAsOther(everyone.target, "f.txt");
  assert.equal(read.code, 0, read.stderr);
});

engineNodeTest(
  "upstream forms and the new options reach the engine as the volume gave them",
  async () => {
    await using h = await startEngineNode();
    const owner = h.rgw.AWS_ACCESS_KEY_ID!;
    const v = await publishVolume(h, {
      flags: [
        "-f",
        "-d",
        "allow-delete",
        "requester-pays",
        `expected-bucket-owner=${owner}`,
        "user-agent-prefix=my-team/1.0",
        "memory-target=1024",
        "upload-checksums=crc64nvme",
        "infer-content-type",
        "log-metrics",
      ],
    });
    const args = await cmdline(await enginePid(v.mp));
    assert.equal(args.filter((a) => a === "--foreground").length, 1, args.join(" "));
    for (
      const a of [
        "--debug",
        "--requester-pays",
        `--expected-bucket-owner=${owner}`,
        "--memory-target=1024",
        "--upload-checksums=crc64nvme",
        "--infer-content-type",
        "--log-metrics",
      ]
    ) assert.ok(args.includes(a), `${a} missing from ${args.join(" ")}`);
    assert.ok(
      args.some((a) =>
        /^--user-agent-prefix=my-team\/1\.0 s3-csi-driver\/\S+ credential-source#driver$/.test(a)
      ),
      args.join(" "),
    );
    await writeSequential(`${v.target}/data.json`, new TextEncoder().encode('{"ok":true}'));
    const head = await h.s3.send(new HeadObjectCommand({ Bucket: h.bucket, Key: "data.json" }));
    assert.equal(head.ContentType, "application/json");
    assert.equal(head.ContentLength, 11);
  },
);
