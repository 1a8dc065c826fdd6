/**
 * Several S3 endpoints in one cluster, on the real node: the tier's server is the driver's endpoint;
 * a second server of the other kind (Ceph RGW next to versitygw, or the reverse), reached by pods
 * through its own relay, is named by a volume's node-publish Secret (`endpoint`, with the driver's
 * credentials: the test servers share their keys). One pod mounts a volume of each; each write
 * lands in its own server's bucket and only there. A Secret whose endpoint has a path is refused
 * with the driver's message.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { SECRETS } from "../../src/kube/resources.ts";
import { startS3Server } from "../testbed/sandbox/s3_server.ts";
import { startTcpRelay } from "../testbed/services/real_node/tcp_relay.ts";
import { waitFor } from "../_helpers.ts";
import { type Step, unique } from "../scenarios/cluster.ts";
import { report, type Tier } from "./_harness.ts";

interface S3paSpec {
  secretName?: string;
  authenticationSource?: string;
}

/** Per-volume endpoints: two S3 servers at once. */
export async function perVolumeEndpoint(tier: Tier, step: Step): Promise<void> {
  const e = tier.cluster;
  const kind = tier.s3.kind === "rgw" ? "versitygw" : "rgw";
  const abort = new AbortController();
  const second = await startS3Server(kind, tier.logDir, tier.logDir, abort.signal);
  const target = new URL(second.env.S3_ENDPOINT);
  const relay = startTcpRelay({
    hostname: tier.node.nodeIp,
    target: { hostname: target.hostname, port: Number(target.port) },
  });
  const podEndpoint = `http://${tier.node.nodeIp}:${relay.port}`;
  report(`second S3 server for pods: ${podEndpoint} → ${second.env.S3_ENDPOINT} (${kind})`);
  assert.equal(
    second.env.AWS_ACCESS_KEY_ID,
    e.s3Env.AWS_ACCESS_KEY_ID,
    "the test servers share their keys (the volume uses the driver's)",
  );
  const s3b = new S3Client({
    endpoint: second.env.S3_ENDPOINT,
    region: second.env.AWS_REGION,
    forcePathStyle: true,
    credentials: {
      accessKeyId: second.env.AWS_ACCESS_KEY_ID,
      secretAccessKey: second.env.AWS_SECRET_ACCESS_KEY,
    },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const bucketA = await e.bucket("ep-a");
  const bucketB = `ep-b-${unique()}`;
  await s3b.send(new CreateBucketCommand({ Bucket: bucketB }));
  const secret = `ep-${unique()}`;
  const badSecret = `ep-bad-${unique()}`;
  const volA = `ep-a-${unique()}`;
  const volB = `ep-b-${unique()}`;
  const volBad = `ep-bad-${unique()}`;
  try {
    await e.secret(secret, "", "", { endpoint: podEndpoint });
    await e.secret(badSecret, "", "", { endpoint: `${podEndpoint}/tenant` });
    await e.staticVolume(volA, { bucket: bucketA });
    // mount-s3 cannot write to Ceph RGW 16 (empty ETag of CompleteMultipartUpload): rclone there.
    const engine = kind === "rgw" ? { engine: "rclone" } : {};
    await e.staticVolume(volB, { bucket: bucketB, secret, attributes: engine });
    await e.staticVolume(volBad, { bucket: bucketB, secret: badSecret });

    await step("one pod, two volumes on two S3 servers: each write lands in its own", async () => {
      const out = await e.run({
        name: `ep-${unique()}`,
        volumes: [{ claim: volA, mountPath: "/a" }, { claim: volB, mountPath: "/b" }],
        script: "set -e; echo to-first > /a/x.txt; echo to-second > /b/y.txt; ls /a /b",
      });
      assert.match(out, /x\.txt/);
      assert.deepEqual(await e.keys(bucketA), ["x.txt"], "the driver's endpoint got x.txt only");
      assert.equal(await e.get(bucketA, "x.txt"), "to-first\n");
      const listed = await s3b.send(new ListObjectsV2Command({ Bucket: bucketB }));
      assert.deepEqual((listed.Contents ?? []).map((o) => o.Key), ["y.txt"]);
      const y = await s3b.send(new GetObjectCommand({ Bucket: bucketB, Key: "y.txt" }));
      assert.equal(await y.Body!.transformToString(), "to-second\n");
      await assert.rejects(
        e.s3.send(new HeadBucketCommand({ Bucket: bucketB })),
        "the second volume's bucket is not on the driver's server",
      );
      await e.waitReleased();
    });

    await step("the volumes' Mountpoint Pods are keyed by their Secrets", async () => {
      const pod = await e.pod({
        name: `ep-keys-${unique()}`,
        volumes: [{ claim: volA, mountPath: "/a" }, { claim: volB, mountPath: "/b" }],
        script: "echo READY; exec sleep 300",
      });
      try {
        await e.waitLog(pod, "READY");
        const specs = (await e.s3pas()).map((s) => s.spec as S3paSpec);
        assert.deepEqual(
          specs.map((s) => `${s.authenticationSource} ${s.secretName ?? "-"}`).sort(),
          ["driver -", `driver ${secret}`],
        );
      } finally {
        await e.deletePod(pod.metadata.name);
      }
      await e.waitReleased();
    });

    await step("an endpoint with a path is refused before anything is mounted", async () => {
      const pod = await e.pod({
        name: `ep-bad-${unique()}`,
        volumes: [{ claim: volBad, mountPath: "/b" }],
        script: "echo SHOULD-NOT-RUN",
      });
      try {
        const ev = await waitFor("a FailedMount event", async () => (await e.events(pod))[0], {
          timeoutMs: 45_000,
          intervalMs: 200,
        });
        assert.match(
          ev.message!,
          /InvalidArgument.*Node-publish Secret key "endpoint" ".*\/tenant" has a path/,
        );
        assert.equal(await e.log(pod), "");
      } finally {
        await e.deletePod(pod.metadata.name);
      }
      await e.waitReleased();
      assert.deepEqual(await e.fuseMounts(), []);
    });
  } finally {
    for (const v of [volA, volB, volBad]) await e.dropVolume(v);
    for (const s of [secret, badSecret]) {
      await e.client.delete(SECRETS, s, e.ns).catch(() => false);
    }
    await e.dropBucket(bucketA);
    try {
      const list = await s3b.send(new ListObjectsV2Command({ Bucket: bucketB }));
      for (const o of list.Contents ?? []) {
        await s3b.send(new DeleteObjectCommand({ Bucket: bucketB, Key: o.Key! }));
      }
      await s3b.send(new DeleteBucketCommand({ Bucket: bucketB }));
    } catch { /* the server goes anyway */ }
    s3b.destroy();
    await relay.close();
    await second.stop();
    abort.abort();
  }
}
