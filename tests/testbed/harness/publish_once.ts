/**
 * `deno run -A publish_once.ts <socket> <request-json>`: one NodePublishVolume, then `ok` or
 * `error: …` on stdout. Run as a child so that killing the node plugin under the call cannot
 * abort the test process (grpc-js over Deno's node:http2).
 *
 * @module
 */
import { connectCsi } from "../../../src/csi/client.ts";

if (import.meta.main) {
  const [socket, json] = Deno.args;
  if (!socket || !json) throw new Error("usage: publish_once.ts <socket> <request-json>");
  const csi = connectCsi(socket, { timeoutMs: 120_000 });
  try {
    await csi.node.nodePublishVolume(JSON.parse(json));
    await Deno.stdout.write(new TextEncoder().encode("ok\n"));
  } catch (err) {
    const text = `error: ${err instanceof Error ? err.message : String(err)}\n`;
    await Deno.stdout.write(new TextEncoder().encode(text));
  } finally {
    csi.close();
  }
}
