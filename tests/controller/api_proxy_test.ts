/**
 * The failover tests' {@link ApiProxy} records when the server answered a write even when the
 * client that sent it died first (a SIGKILLed leader): without that record the evidence would say
 * "answered never" for a write the server had acted on before the other process took over.
 *
 * @module
 */
import assert from "node:assert/strict";
import net from "node:net";
import { stringify } from "yaml";
import { tempDir, waitFor } from "../_helpers.ts";
import { ApiProxy } from "./_api_proxy.ts";

Deno.test("api proxy: a write whose client closed before the answer is still recorded as answered", async () => {
  await using dir = await tempDir("s3csi-proxy-");
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
  try {
    const cfg = `${dir.path}/upstream.kubeconfig`;
    await Deno.writeTextFile(
      cfg,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "u", cluster: { server: `http://127.0.0.1:${upstream.addr.port}` } }],
        users: [{ name: "u", user: {} }],
        contexts: [{ name: "u", context: { cluster: "u", user: "u" } }],
        "current-context": "u",
      }),
    );
    await using proxy = await ApiProxy.start(cfg, dir.path, "p");
    const port = Number(
      /127\.0\.0\.1:(\d+)/.exec(await Deno.readTextFile(proxy.kubeconfigPath))![1],
    );
    const body = '{"spec":{}}';
    const sock = net.connect({ host: "127.0.0.1", port });
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.write(
      `POST /apis/x/v1/things HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
        `content-length: ${body.length}\r\n\r\n${body}`,
    );
    await gotRequest;
    // The client dies with its write in flight; the server answers afterwards.
    sock.destroy();
    await waitFor("the proxy to see the client close", () => proxy.draining === 1, {
      timeoutMs: 10_000,
      intervalMs: 10,
    });
    const beforeAnswer = performance.now();
    release();
    await waitFor("the upstream connection to be read and closed", () => proxy.draining === 0, {
      timeoutMs: 10_000,
      intervalMs: 10,
    });
    assert.equal(proxy.records.length, 1);
    const [rec] = proxy.records;
    assert.equal(rec!.method, "POST");
    assert.equal(rec!.status, 201, "the answer's status was read although the client had gone");
    assert.ok(rec!.doneAt! >= beforeAnswer, "doneAt is when the server answered");
  } finally {
    release();
    await upstream.shutdown();
  }
});
