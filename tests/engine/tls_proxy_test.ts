/**
 * Our mount-s3 against an HTTPS S3 endpoint whose certificate a private CA signed (works only
 * with `AWS_CA_BUNDLE`), and through an HTTP proxy from the environment (CONNECT tunnels for https
 * endpoints, forwarding for http ones), counted by a small proxy (`_counting_proxy.ts`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { startProxy } from "../testbed/harness/counting_proxy.ts";
import {
  assertNoLeftoverMounts,
  engineEnv,
  engineTest,
  failingEngine,
  fuseReason,
  mountEngine,
  objectSha256,
  s3Client,
  type Server,
  sha256,
  startVersitygw,
  tempBucket,
  testBytes,
  versitygwReason,
  writeWithDd,
} from "../testbed/harness/engine.ts";
import { freePort } from "../_helpers.ts";

const reason = fuseReason() ?? versitygwReason() ?? opensslReason();

function opensslReason(): string | undefined {
  try {
    new Deno.Command("openssl", { args: ["version"], stdout: "null" }).outputSync();
    return undefined;
  } catch {
    return "needs openssl (apt-get install openssl)";
  }
}

/** Read an SDK upload and write a 5 MiB+1 file through the mount, checked with the SDK. */
async function roundTrip(
  server: Server,
  bucket: string,
  env: Record<string, string>,
): Promise<void> {
  const s3 = await s3Client(server);
  try {
    const bytes = testBytes(5 * 1024 * 1024 + 1, 99);
    const key = `mount-${crypto.randomUUID()}.bin`;
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "sdk.txt", Body: "from the sdk" }));
    {
      await using m = await mountEngine({ bucket, server, env, timeoutMs: 30_000 });
      assert.equal(await Deno.readTextFile(`${m.dir}/sdk.txt`), "from the sdk");
      // In a child process: the proxy of these tests runs on this process's event loop.
      await writeWithDd(`${m.dir}/${key}`, bytes);
      assert.equal(await m.unmount(), 0);
    }
    assert.equal(await objectSha256(s3, bucket, key), sha256(bytes));
  } finally {
    s3.closeAll();
  }
}

engineTest(
  "engine: an HTTPS endpoint signed by a private CA works only with AWS_CA_BUNDLE",
  reason,
  async () => {
    await using server = await startVersitygw({ tls: true });
    assert.match(server.env.S3_ENDPOINT!, /^https:/);
    const s3 = await s3Client(server);
    try {
      await using bucket = await tempBucket(s3);
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        const without = await failingEngine({
          args: [bucket.name, dir, "--force-path-style"],
          env: engineEnv(server),
        });
        assert.equal(without.code, 6, without.stderr);
        assert.equal(without.stderr.trim().split("\n").length, 1, without.stderr);
        assert.match(without.stderr, /TLS/);
      } finally {
        await Deno.remove(dir);
      }
      await roundTrip(server, bucket.name, { AWS_CA_BUNDLE: server.caFile! });
    } finally {
      s3.closeAll();
      await assertNoLeftoverMounts();
    }
  },
);

engineTest(
  "engine: HTTPS_PROXY tunnels S3 requests through the proxy; NO_PROXY bypasses it",
  reason,
  async () => {
    await using server = await startVersitygw({ tls: true });
    const s3 = await s3Client(server);
    try {
      await using bucket = await tempBucket(s3);
      const endpoint = new URL(server.env.S3_ENDPOINT!);
      {
        await using proxy = await startProxy();
        await roundTrip(server, bucket.name, {
          AWS_CA_BUNDLE: server.caFile!,
          HTTPS_PROXY: proxy.url,
        });
        assert.ok(proxy.log.connects.length > 0, "the engine never used the proxy");
        assert.ok(
          proxy.log.connects.every((c) => c === endpoint.host),
          proxy.log.connects.join(" "),
        );
      }
      {
        await using proxy = await startProxy();
        await roundTrip(server, bucket.name, {
          AWS_CA_BUNDLE: server.caFile!,
          https_proxy: proxy.url,
          NO_PROXY: "127.0.0.1",
        });
        assert.deepEqual(proxy.log.connects, [], "NO_PROXY=127.0.0.1 still went through the proxy");
      }
      // A proxy that does not answer fails the start: requests really depend on it.
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        const r = await failingEngine({
          args: [bucket.name, dir, "--force-path-style"],
          env: engineEnv(server, {
            AWS_CA_BUNDLE: server.caFile!,
            HTTPS_PROXY: `http://127.0.0.1:${freePort()}`,
          }),
        });
        assert.equal(r.code, 6, r.stderr);
        assert.match(r.stderr, /proxy/);
      } finally {
        await Deno.remove(dir);
      }
    } finally {
      s3.closeAll();
      await assertNoLeftoverMounts();
    }
  },
);

engineTest("engine: HTTP_PROXY forwards requests to an http endpoint", reason, async () => {
  await using server = await startVersitygw();
  const s3 = await s3Client(server);
  try {
    await using bucket = await tempBucket(s3);
    await using proxy = await startProxy();
    await roundTrip(server, bucket.name, { HTTP_PROXY: proxy.url });
    assert.ok(proxy.log.forwards.length > 0, "the engine never used the proxy");
    const origin = new URL(server.env.S3_ENDPOINT!).origin;
    assert.ok(
      proxy.log.forwards.every((u) => u.startsWith(`${origin}/`)),
      proxy.log.forwards.join(" "),
    );
  } finally {
    s3.closeAll();
    await assertNoLeftoverMounts();
  }
});
