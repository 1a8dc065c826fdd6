/**
 * Our mount-s3 checks the bucket at start on the mount's own S3 client (one client: the start is
 * as fast as upstream's) with at most 3 attempts, so a failing server is reported within seconds;
 * once mounted, its requests get every attempt of `AWS_MAX_ATTEMPTS`. Failures are injected by
 * the small proxy of `_counting_proxy.ts` (`HTTP_PROXY` for the http endpoint), which counts the
 * attempts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import {
  type ForwardedRequest,
  s3ErrorResponse,
  startProxy,
} from "../testbed/harness/counting_proxy.ts";
import {
  assertNoLeftoverMounts,
  engineEnv,
  engineTest,
  failingEngine,
  fuseReason,
  mountEngine,
  s3Client,
  startVersitygw,
  tempBucket,
  versitygwReason,
} from "../testbed/harness/engine.ts";

const reason = fuseReason() ?? versitygwReason();

const internalError = s3ErrorResponse(500, "Internal Server Error", "InternalError");

engineTest(
  "engine: the bucket check at start gives up after 3 attempts; the mount's requests get AWS_MAX_ATTEMPTS",
  reason,
  async () => {
    await using server = await startVersitygw();
    const s3 = await s3Client(server);
    try {
      await using bucket = await tempBucket(s3);
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        // Every request fails: the check stops at its 3rd attempt although 10 are allowed.
        await using failing = await startProxy({ answer: () => internalError });
        const r = await failingEngine({
          args: [bucket.name, dir, "--force-path-style"],
          env: engineEnv(server, { HTTP_PROXY: failing.url, AWS_MAX_ATTEMPTS: "10" }),
        });
        const lines = r.stderr.trim().split("\n");
        assert.equal(r.code, 6, r.stderr);
        assert.equal(lines.length, 1, r.stderr);
        assert.match(
          lines[0]!,
          /^mount-s3: error: cannot reach bucket '.*' .*AWS_ERROR_S3_INTERNAL_ERROR/,
        );
        const lists = failing.log.requests.filter((q) => q.target.includes("list-type=2"));
        assert.equal(lists.length, 3, failing.log.forwards.join(" "));
        assert.equal(failing.log.requests.length, 3, failing.log.forwards.join(" "));
      } finally {
        await Deno.remove(dir).catch(() => {}); // empty; never recursive where a mount may be
      }

      // Once mounted, a request that fails 4 times succeeds at its 5th attempt.
      await s3.send(new PutObjectCommand({ Bucket: bucket.name, Key: "flaky", Body: "at last" }));
      let injected = 0;
      const isFlaky = (q: ForwardedRequest) =>
        ["GET", "HEAD"].includes(q.method) && new URL(q.target).pathname.endsWith("/flaky");
      await using proxy = await startProxy({
        answer: (q) => isFlaky(q) && injected < 4 ? (injected++, internalError) : undefined,
      });
      {
        await using m = await mountEngine({
          bucket: bucket.name,
          server,
          env: { HTTP_PROXY: proxy.url, AWS_MAX_ATTEMPTS: "10" },
        });
        assert.equal(await Deno.readTextFile(`${m.dir}/flaky`), "at last");
        assert.equal(await m.unmount(), 0);
      }
      assert.equal(injected, 4);
      assert.ok(
        proxy.log.requests.filter(isFlaky).length >= 5,
        proxy.log.forwards.join(" "),
      );
    } finally {
      s3.closeAll();
      await assertNoLeftoverMounts();
    }
  },
);
