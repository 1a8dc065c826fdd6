/**
 * Per-volume Secret credentials, fsGroup and concurrent publishes through the real node plugin,
 * on the real kernel with RGW (run as root).
 */
import assert from "node:assert/strict";
import { CreateBucketCommand, GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { runToEnd } from "../_helpers.ts";
import { emptyAndDeleteBucket } from "../testbed/harness/s3_cleanup.ts";
import { kubeletMkdirParent, nodeTest, startHarness } from "../testbed/harness/node_harness.ts";

nodeTest("per-volume Secret credentials reach the engine (not the driver's)", async () => {
  await using h = await startHarness();
  const other = new S3Client({
    endpoint: h.rgw.S3_ENDPOINT!,
    region: h.rgw.AWS_REGION ?? "us-east-1",
    forcePathStyle: true,
    credentials: {
      accessKeyId: h.rgw.S3_OTHER_ACCESS_KEY_ID!,
      secretAccessKey: h.rgw.S3_OTHER_SECRET_ACCESS_KEY!,
    },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const bucket = `other-${crypto.randomUUID().slice(0, 8)}`;
  try {
    await other.send(new CreateBucketCommand({ Bucket: bucket }));
    const mp = await h.mountpointPod("mp-secret");
    await h.assign("pv-s", "vol-pv-s", mp.name, ["uid-s"]);
    const t = h.target("uid-s", "pv-s");
    await kubeletMkdirParent(t);
    const req = h.publishRequest("uid-s", "pv-s", {
      volumeContext: { bucketName: bucket, authenticationSource: "secret" },
    });
    // The driver's keys cannot see the other user's bucket, so a fallback would fail here.
    await h.csi.node.nodePublishVolume({
      ...req,
      secrets: {
        access_key_id: h.rgw.S3_OTHER_ACCESS_KEY_ID!,
        secret_access_key: h.rgw.S3_OTHER_SECRET_ACCESS_KEY!,
      },
    });
    await Deno.writeTextFile(`${t}/s.txt`, "with the volume's own keys\n");
    const o = await other.send(new GetObjectCommand({ Bucket: bucket, Key: "s.txt" }));
    assert.equal(await o.Body!.transformToString(), "with the volume's own keys\n");
    const cred = await Deno.readTextFile(`${mp.commDir}/credentials/s3-csi-credentials`);
    assert.match(cred, new RegExp(`aws_access_key_id=${h.rgw.S3_OTHER_ACCESS_KEY_ID}`));
    const st = await Deno.stat(`${mp.commDir}/credentials/s3-csi-credentials`);
    assert.equal(st.mode! & 0o777, 0o600);
    assert.equal(st.uid, 1000, "owned by the Mountpoint Pod's user");
  } finally {
    await h.csi.node.nodeUnpublishVolume({
      volumeId: "vol-pv-s",
      targetPath: h.target("uid-s", "pv-s"),
    }).catch(() => {});
    await emptyAndDeleteBucket(other, bucket).catch(() => {});
    other.destroy();
  }
});

nodeTest(
  "fsGroup: gid and group-writable modes; concurrent publishes share one mount",
  async () => {
    await using h = await startHarness();
    const mp = await h.mountpointPod("mp-fsg");
    const uids = ["uid-f1", "uid-f2", "uid-f3"];
    await h.assign("pv-f", "vol-pv-f", mp.name, uids);
    const cap = {
      volumeCapability: {
        mount: { mountFlags: ["allow-delete", "allow-overwrite"], volumeMountGroup: "3000" },
        accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
      },
    };
    for (const u of uids) await kubeletMkdirParent(h.target(u, "pv-f"));
    await Promise.all(
      uids.map((u) => h.csi.node.nodePublishVolume(h.publishRequest(u, "pv-f", cap))),
    );
    const fuse = (await readMountInfo()).filter((m) =>
      m.fsType === "fuse" && m.mountPoint.startsWith(h.root)
    );
    assert.equal(new Set(fuse.map((m) => m.majorMinor)).size, 1, "one FUSE connection");
    assert.equal(fuse.length, 4, "one source and three binds");
    const t = h.target("uid-f1", "pv-f");
    const root = await Deno.stat(t);
    assert.equal(root.gid, 3000);
    assert.equal(root.mode! & 0o777, 0o770);
    // Workloads see only their bind mount; here other users must traverse the kubelet dirs.
    for (
      let d = t.replace(/\/mount$/, "");
      d.startsWith(`${h.root}/`);
      d = d.replace(/\/[^/]+$/, "")
    ) {
      await Deno.chmod(d, 0o755);
    }
    // A non-root member of the group can write.
    const r = await runToEnd("setpriv", [
      "--reuid=4000",
      "--regid=3000",
      "--clear-groups",
      "sh",
      "-c",
      `echo group > ${t}/g.txt && stat -c %g:%a ${t}/g.txt`,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), "3000:660");
    // Someone outside the group cannot.
    const denied = await runToEnd("setpriv", [
      "--reuid=5000",
      "--regid=5000",
      "--clear-groups",
      "sh",
      "-c",
      `ls ${t}`,
    ]);
    assert.notEqual(denied.code, 0);
  },
);
