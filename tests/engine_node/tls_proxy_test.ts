/**
 * The engine's network settings through the whole path, on versitygw:
 *
 * - an HTTPS S3 endpoint whose certificate a private CA signed works only with the CA bundle: the
 *   deploy's `tls.caCertConfigMap` is mounted in Mountpoint Pods and named to the mounter
 *   (`MOUNTER_CA_BUNDLE`), which hands it to mount-s3 as `AWS_CA_BUNDLE`; without it the publish
 *   fails with the engine's TLS error and nothing stays mounted;
 * - the node plugin's proxy setting (`HTTP_PROXY`, as the deploy's `proxy.*` values set it)
 *   reaches the engine: every S3 request of the volume goes through a counting proxy, and a proxy
 *   that does not answer fails the publish. The node's own bucket check is off here, so what the
 *   proxy sees comes from the engine alone.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { startProxy } from "../testbed/harness/counting_proxy.ts";
import { objectSha256, sha256, testBytes, writeWithDd } from "../testbed/harness/engine.ts";
import {
  engineNodeTest,
  enginePid,
  environ,
  publishVolume,
  startEngineNode,
} from "../testbed/harness/engine_node.ts";
import { freePort } from "../_helpers.ts";

engineNodeTest(
  "HTTPS with a private CA works only with the CA bundle of the Mountpoint Pod",
  async () => {
    await using h = await startEngineNode({ tls: true });
    assert.match(h.rgw.S3_ENDPOINT!, /^https:/);
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "a.txt", Body: "tls" }));

    // Without the CA: the engine cannot verify the server; the publish fails with its reason.
    const err = await publishVolume(h, { flags: ["allow-delete"] }).then(
      () => undefined,
      (e: { code?: number; details?: string }) => e,
    );
    assert.ok(err, "the publish must fail without the CA bundle");
    assert.equal(err.code, 9, err.details ?? ""); // FAILED_PRECONDITION: the mounter's report
    assert.match(err.details ?? "", /mount-s3/);
    assert.match(err.details ?? "", /TLS|certificate|tls/i);
    assert.deepEqual(await h.ourMounts(), [], "nothing stays mounted");

    // With the CA (the pod's custom-ca volume): reads and writes work.
    const v = await publishVolume(h, { flags: ["allow-delete"], pod: { caBundle: h.caFile! } });
    const env = await environ(await enginePid(v.mp));
    assert.equal(env.AWS_CA_BUNDLE, h.caFile, "the engine got the pod's CA bundle");
    assert.equal(await Deno.readTextFile(`${v.target}/a.txt`), "tls");
    const bytes = testBytes(5 * 1024 * 1024 + 1, 5);
    await writeWithDd(`${v.target}/b.bin`, bytes);
    assert.equal(await objectSha256(h.s3, h.bucket, "b.bin"), sha256(bytes));
  },
);

engineNodeTest("the node plugin's proxy setting is used by the engine", async () => {
  await using proxy = await startProxy();
  await using h = await startEngineNode({
    nodeArgs: ["--bucket-check=false"],
    nodeEnv: { HTTP_PROXY: proxy.url, http_proxy: proxy.url },
  });
  const origin = new URL(h.rgw.S3_ENDPOINT!).origin;
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "a.txt", Body: "proxied" }));
  const v = await publishVolume(h, { flags: ["allow-delete"] });
  const env = await environ(await enginePid(v.mp));
  assert.equal(env.HTTP_PROXY, proxy.url);
  assert.equal(await Deno.readTextFile(`${v.target}/a.txt`), "proxied");
  const bytes = testBytes(5 * 1024 * 1024 + 1, 6);
  // dd in a child process: the proxy runs on this process's event loop.
  await writeWithDd(`${v.target}/b.bin`, bytes);
  assert.equal(await objectSha256(h.s3, h.bucket, "b.bin"), sha256(bytes));
  assert.ok(proxy.log.forwards.length > 0, "the engine never used the proxy");
  assert.ok(
    proxy.log.forwards.every((u) => u.startsWith(`${origin}/`)),
    proxy.log.forwards.join(" "),
  );
  assert.ok(proxy.log.forwards.some((u) => u.includes("b.bin")), "the upload went through it");
});

engineNodeTest(
  "a proxy that does not answer fails the publish (requests depend on it)",
  async () => {
    const dead = `http://127.0.0.1:${freePort()}`;
    await using h = await startEngineNode({
      nodeArgs: ["--bucket-check=false"],
      nodeEnv: { HTTP_PROXY: dead, http_proxy: dead },
    });
    const err = await publishVolume(h, { flags: ["allow-delete"] }).then(
      () => undefined,
      (e: { code?: number; details?: string }) => e,
    );
    assert.ok(err, "the publish must fail when the proxy does not answer");
    assert.match(err.details ?? "", /mount-s3/);
    assert.deepEqual(await h.ourMounts(), [], "nothing stays mounted");
  },
);
