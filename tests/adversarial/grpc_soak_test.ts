/**
 * Soak of the node plugin's gRPC server with kubelet-style clients: grpc-go (the kubelet's gRPC
 * library, built from the Go module proxy) dialling a new connection for every call and closing it
 * after (a GOAWAY at the end of each call), several clients at once, every 10th call abandoned
 * mid-flight (context cancelled: RST_STREAM, or the connection closed under it), every 100th
 * connection misbehaving at the HTTP/2 level (half frames, HTTP/1.1, GOAWAY right after the
 * preface, a bogus header block). 10,000 cycles; the node plugin must answer every call with the
 * expected code and never crash or restart.
 *
 * Before ADR 0008 the node plugin served with grpc-js on Deno's `node:http2` (nghttp2), which
 * could abort the process with `find_stream_on_goaway_func: Assertion 'stream->closed_next ==
 * NULL'` on a client's GOAWAY.
 */
import assert from "node:assert/strict";
import { connectCsi } from "../../src/csi/client.ts";
import {
  CRASH_SIGNS,
  exited,
  kubeletClient,
  runKubeletClient,
  startBareNode,
} from "./_adversarial.ts";

const CYCLES = Number(Deno.env.get("SOAK_CYCLES") ?? 10_000);
const client = await kubeletClient();

Deno.test({
  name:
    `soak: ${CYCLES} kubelet-style connect/call/close cycles, 8 clients at once, abandoned calls and broken HTTP/2: 0 crashes${
      client.skip ? ` (skipped: ${client.skip})` : ""
    }`,
  ignore: client.skip !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using n = await startBareNode(["--attachment-timeout=60s"]);
    const pid = n.node.child.pid;
    const { code, result, stderr } = await runKubeletClient(client.bin!, {
      socket: n.socket,
      kubeletRoot: n.root,
      cycles: CYCLES,
      workers: 8,
      abandonEvery: 10,
      rawEvery: 100,
    });
    Deno.stderr.writeSync(
      new TextEncoder().encode(`SOAK ${JSON.stringify({ ...result, firstErrors: undefined })}\n`),
    );
    assert.ok(result, `no result from the client (exit ${code}): ${stderr.slice(-2000)}`);
    assert.equal(result.cycles, CYCLES);
    assert.deepEqual(result.firstErrors, null, "every call got its expected answer");
    assert.equal(result.unexpected, 0);
    assert.equal(code, 0);
    assert.equal(result.raw, Math.floor(CYCLES / 100));
    assert.equal(result.abandoned, Math.floor(CYCLES / 10) - Math.floor(CYCLES / 100));
    // The same process is still serving: no crash, no restart.
    assert.equal(await exited(n.node), false, "the node plugin is still running");
    assert.equal(n.node.child.pid, pid);
    assert.doesNotMatch(n.node.stderr(), CRASH_SIGNS);
    const csi = connectCsi(n.socket, { timeoutMs: 10_000 });
    try {
      assert.deepEqual(await csi.identity.probe({}), { ready: { value: true } });
    } finally {
      csi.close();
    }
  },
});
