/**
 * The node plugin's bucket check (`AwsBucketProbe`) with the options that change what it sends:
 * on versitygw, an unsigned check passes on a public bucket and is denied on a private one, and an
 * expected owner that is not the bucket's is denied; on a recording server, requester-pays and the
 * expected owner are headers and an unsigned request carries no signature.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutBucketPolicyCommand } from "@aws-sdk/client-s3";
import { AwsBucketProbe, type ProbeTarget } from "../../src/s3/bucket_probe.ts";
import {
  s3Client,
  startVersitygw,
  tempBucket,
  versitygwReason,
} from "../testbed/harness/engine.ts";
import { freePort, testOrSkip } from "../_helpers.ts";

function target(endpoint: string, bucket: string, more: Partial<ProbeTarget> = {}): ProbeTarget {
  return {
    bucket,
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    accessKeyId: "",
    secretAccessKey: "",
    ...more,
  };
}

testOrSkip(versitygwReason(), {
  name:
    "bucket probe: unsigned on a public bucket passes, on a private one is denied; another owner is denied",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using server = await startVersitygw();
    const s3 = await s3Client(server);
    const probe = new AwsBucketProbe();
    try {
      await using open = await tempBucket(s3);
      await using closed = await tempBucket(s3);
      await s3.send(
        new PutBucketPolicyCommand({
          Bucket: open.name,
          Policy: JSON.stringify({
            Version: "2012-10-17",
            Statement: [{
              Effect: "Allow",
              Principal: "*",
              Action: ["s3:ListBucket"],
              Resource: [`arn:aws:s3:::${open.name}`],
            }],
          }),
        }),
      );
      const ep = server.env.S3_ENDPOINT!;
      const keys = {
        accessKeyId: server.env.AWS_ACCESS_KEY_ID!,
        secretAccessKey: server.env.AWS_SECRET_ACCESS_KEY!,
      };
      assert.deepEqual(await probe.probe(target(ep, open.name, { anonymous: true }), 10_000), {
        ok: true,
      });
      const denied = await probe.probe(target(ep, closed.name, { anonymous: true }), 10_000);
      assert.equal(denied.ok ? "ok" : denied.reason, "access-denied");
      const owner = await probe.probe(
        target(ep, closed.name, { ...keys, expectedBucketOwner: keys.accessKeyId }),
        10_000,
      );
      assert.deepEqual(owner, { ok: true });
      const other = await probe.probe(
        target(ep, closed.name, { ...keys, expectedBucketOwner: "999999999999" }),
        10_000,
      );
      assert.equal(other.ok ? "ok" : other.reason, "access-denied");
    } finally {
      s3.closeAll();
    }
  },
});

Deno.test("bucket probe: requester-pays and the expected owner are sent; unsigned requests carry no signature", async () => {
  const seen: Headers[] = [];
  const port = freePort();
  const server = Deno.serve({ port, hostname: "127.0.0.1", onListen: () => {} }, (req) => {
    seen.push(req.headers);
    return new Response(null, { status: 200 });
  });
  const probe = new AwsBucketProbe();
  try {
    const ep = `http://127.0.0.1:${port}`;
    const r = await probe.probe(
      target(ep, "bucket-1", { anonymous: true, requesterPays: true, expectedBucketOwner: "42" }),
      5_000,
    );
    assert.deepEqual(r, { ok: true });
    assert.equal(seen[0]!.get("x-amz-request-payer"), "requester");
    assert.equal(seen[0]!.get("x-amz-expected-bucket-owner"), "42");
    assert.equal(seen[0]!.get("authorization"), null);
    await probe.probe(
      target(ep, "bucket-1", { accessKeyId: "AKIA1", secretAccessKey: "s" }),
      5_000,
    );
    assert.match(seen[1]!.get("authorization") ?? "", /^AWS4-HMAC-SHA256 Credential=AKIA1\//);
    assert.equal(seen[1]!.get("x-amz-request-payer"), null);
  } finally {
    await server.shutdown();
  }
});
