import assert from "node:assert/strict";
import {
  ANNOTATION_MOUNT_PROTOCOLS,
  formatProtocols,
  negotiate,
  OUR_PROTOCOLS,
  podProtocols,
  PROTOCOL,
  ProtocolSkewError,
} from "./mount_protocol.ts";

Deno.test("podProtocols(): the annotation, else 1 (pods made before protocol 2)", () => {
  assert.deepEqual(podProtocols({ [ANNOTATION_MOUNT_PROTOCOLS]: "1-2" }), { min: 1, max: 2 });
  assert.deepEqual(podProtocols(undefined), { min: 1, max: 1 });
  for (const bad of ["", "2", "2-1", "0-1", "a-b", "1-2-3", "1-99999"]) {
    assert.deepEqual(podProtocols({ [ANNOTATION_MOUNT_PROTOCOLS]: bad }), { min: 1, max: 1 }, bad);
  }
  assert.equal(formatProtocols(OUR_PROTOCOLS), `1-${PROTOCOL}`);
});

Deno.test("negotiate(): the highest common version; N-1 and N+1 work, further apart fails naming both", () => {
  const ours = { min: 2, max: 3 }; // a node plugin of the release after this one
  assert.equal(negotiate({ min: 1, max: 2 }, ours), 2, "mounter N-1");
  assert.equal(negotiate({ min: 3, max: 4 }, ours), 3, "mounter N+1");
  assert.equal(negotiate({ min: 1, max: 1 }, OUR_PROTOCOLS), 1, "a pod made before protocol 2");
  assert.throws(
    () => negotiate({ min: 1, max: 1 }, ours),
    (e: unknown) =>
      e instanceof ProtocolSkewError &&
      /speaks mount protocols 1-1 and this node plugin 2-3/.test(e.message),
  );
  assert.throws(() => negotiate({ min: 5, max: 6 }, ours), ProtocolSkewError);
});
