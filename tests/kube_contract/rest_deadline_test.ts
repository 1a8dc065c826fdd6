/**
 * The REST client's deadlines against servers that misbehave at the TCP level: one that accepts
 * and never answers, one that sends headers and then stalls the body, and a watch whose stream goes
 * silent. Also the write fence: a refused write never reaches the server.
 *
 * @module
 */
import assert from "node:assert/strict";
import { NotLeaderError, RequestTimeoutError } from "../../src/kube/errors.ts";
import { PODS } from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { rawHttpServer } from "./_raw_http_server.ts";

Deno.test("rest client: a request to a server that never answers fails at its deadline", async () => {
  await using server = rawHttpServer(() => undefined);
  const client = new RestKubeClient({ server: server.url }, { requestTimeoutMs: 300 });
  await assert.rejects(
    () => client.get(PODS, "p", "default"),
    (err: unknown) =>
      err instanceof RequestTimeoutError && /get Pod p: no answer within 300 ms/.test(err.message),
  );
  // A per-call deadline overrides the default.
  await assert.rejects(
    () => client.list(PODS, { timeoutMs: 100 }),
    (err: unknown) => err instanceof RequestTimeoutError && err.ms === 100,
  );
  await client.close();
});

Deno.test("rest client: a response whose body stalls after the headers fails at the deadline", async () => {
  await using server = rawHttpServer(() =>
    'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"items":['
  );
  const client = new RestKubeClient({ server: server.url }, { requestTimeoutMs: 300 });
  await assert.rejects(() => client.list(PODS), RequestTimeoutError);
  await client.close();
});

Deno.test("rest client: a watch outlives the request deadline, and a silent stream ends at its idle timeout", async () => {
  await using server = rawHttpServer(() => {
    const ev = '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}\n';
    return "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n" +
      `${ev.length.toString(16)}\r\n${ev}\r\n`;
  });
  const client = new RestKubeClient({ server: server.url }, { requestTimeoutMs: 100 });
  const events: string[] = [];
  // The idle timeout (800 ms) is longer than the request deadline (100 ms): the watch must not be
  // cut at the deadline once its headers are in, and must end when the stream stays silent.
  await client.watch(PODS, { resourceVersion: "1", inactivityMs: 800 }, (e) => {
    events.push(`${e.type} ${e.object.metadata?.resourceVersion}`);
  });
  assert.deepEqual(events, ["BOOKMARK 7"]);
  await client.close();
});

Deno.test("rest client: the write fence refuses a write before it leaves; reads still go", async () => {
  await using server = rawHttpServer(() =>
    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
  );
  let remaining = 0;
  const client = new RestKubeClient({ server: server.url }, {
    fence: { remainingMs: () => remaining },
  });
  await assert.rejects(
    () => client.create(PODS, { metadata: { name: "p", namespace: "default" } }),
    NotLeaderError,
  );
  await assert.rejects(() => client.delete(PODS, "p", "default"), NotLeaderError);
  assert.deepEqual(server.requests, [], "nothing reached the server");
  await client.get(PODS, "p", "default");
  assert.deepEqual(server.requests, ["GET /api/v1/namespaces/default/pods/p HTTP/1.1"]);
  remaining = 10_000;
  await client.patch(PODS, "p", "default", {});
  assert.equal(server.requests.length, 2);
  await client.close();
});

Deno.test("rest client: a write's deadline is capped at the fence's remaining time", async () => {
  await using server = rawHttpServer(() => undefined);
  const client = new RestKubeClient({ server: server.url }, {
    requestTimeoutMs: 60_000,
    fence: { remainingMs: () => 200 },
  });
  await assert.rejects(
    () => client.patch(PODS, "p", "default", {}),
    (err: unknown) => err instanceof RequestTimeoutError && err.ms === 200,
  );
  await client.close();
});
