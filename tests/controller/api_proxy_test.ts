/**
 * The failover tests' {@link ApiProxy} records when the server answered a write — the evidence
 * that two leaders never acted at once — also when that answer cannot reach the client:
 * - the client died first (a SIGKILLed leader): the answer is still read and recorded;
 * - the proxy is frozen (a hung leader): the answer is recorded when it arrives, and reaches the
 *   client only after the thaw.
 * Without that, a write the server had acted on long before the other process took over would look
 * as if it had been answered after (or never).
 *
 * @module
 */
import assert from "node:assert/strict";
import net from "node:net";
import { Buffer } from "node:buffer";
import { tempDir, waitFor } from "../_helpers.ts";
import { renderKubeconfig } from "../testbed/apiserver/kubeconfig.ts";
import { ApiProxy } from "./_api_proxy.ts";

const WAIT = { timeoutMs: 10_000, intervalMs: 10 };

/** An upstream whose one answer (201) is held until `release()`, a proxy to it and a client. */
async function fixture() {
  const dir = await tempDir("s3csi-proxy-");
  let release!: () => void;
  const answerNow = new Promise<void>((r) => release = r);
  let received!: () => void;
  const gotRequest = new Promise<void>((r) => received = r);
  const upstream = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, async () => {
    received();
    await answerNow;
    return new Response('{"kind":"Status"}', {
      status: 201,
      headers: { "content-type": "application/json" },
    });
  });
  const cfg = `${dir.path}/upstream.kubeconfig`;
  await Deno.writeTextFile(
    cfg,
    renderKubeconfig({ server: `http://127.0.0.1:${upstream.addr.port}`, name: "u" }),
  );
  const proxy = await ApiProxy.start(cfg, dir.path, "p");
  const port = Number(/127\.0\.0\.1:(\d+)/.exec(await Deno.readTextFile(proxy.kubeconfigPath))![1]);
  const sock = net.connect({ host: "127.0.0.1", port });
  let fromProxy = Buffer.alloc(0);
  sock.on("data", (d: Buffer) => fromProxy = Buffer.concat([fromProxy, d]));
  sock.on("error", () => {});
  await new Promise<void>((r) => sock.once("connect", () => r()));
  const body = '{"spec":{}}';
  sock.write(
    `POST /apis/x/v1/things HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\n\r\n${body}`,
  );
  await gotRequest;
  return {
    proxy,
    sock,
    release,
    received: () => fromProxy.toString("latin1"),
    async [Symbol.asyncDispose]() {
      release();
      sock.destroy();
      await proxy[Symbol.asyncDispose]();
      await upstream.shutdown();
      await dir[Symbol.asyncDispose]();
    },
  };
}

Deno.test("api proxy: a write whose client closed before the answer is still recorded as answered", async () => {
  await using f = await fixture();
  // The client dies with its write in flight; the server answers afterwards.
  f.sock.destroy();
  await waitFor("the proxy to see the client close", () => f.proxy.draining === 1, WAIT);
  const beforeAnswer = performance.now();
  f.release();
  await waitFor(
    "the upstream connection to be read and closed",
    () => f.proxy.draining === 0,
    WAIT,
  );
  assert.equal(f.proxy.records.length, 1);
  const [rec] = f.proxy.records;
  assert.equal(rec!.method, "POST");
  assert.equal(rec!.status, 201, "the answer's status was read although the client had gone");
  assert.ok(rec!.doneAt! >= beforeAnswer, "doneAt is when the server answered");
});

Deno.test("api proxy: an answer arriving while frozen is recorded then, and delivered after the thaw", async () => {
  await using f = await fixture();
  f.proxy.freeze();
  const beforeAnswer = performance.now();
  f.release();
  await waitFor("the answer to be recorded", () => f.proxy.records[0]?.doneAt !== undefined, WAIT);
  const answeredAt = f.proxy.records[0]!.doneAt!;
  assert.ok(answeredAt >= beforeAnswer);
  assert.equal(f.proxy.records[0]!.status, 201);
  assert.equal(f.received(), "", "nothing reaches the client while frozen");
  const thawedAt = performance.now();
  f.proxy.thaw();
  await waitFor("the answer to reach the client", () => f.received().includes("Status"), WAIT);
  assert.match(f.received(), /^HTTP\/1\.1 201 /);
  assert.ok(answeredAt < thawedAt, "the record keeps the arrival time, not the thaw");
});
