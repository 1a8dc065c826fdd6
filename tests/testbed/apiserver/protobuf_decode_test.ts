import assert from "node:assert/strict";
import { decodeKubeProtobuf, ProtobufDecodeError } from "./protobuf_decode.ts";

function hex(text: string): Uint8Array {
  const clean = text.replace(/\s+/g, "");
  return new Uint8Array(clean.match(/../g)!.map((h) => parseInt(h, 16)));
}

// Bodies captured from `kubectl create configmap pbcm --from-literal=a=b --from-literal=c=d`
// and `kubectl create secret generic pbs --from-literal=k=v` (kubectl v1.32).
const CONFIGMAP = hex(`6b387300 0a0f0a02 76311209 436f6e66 69674d61 7012260a 140a0470 62636d12
  001a0022 002a0032 00380042 0012060a 01611201 6212060a 01631201 641a0022 00`);
const SECRET = hex(`6b387300 0a0c0a02 76311206 53656372 6574121f 0a130a03 70627312 001a0022
  002a0032 00380042 0012060a 016b1201 761a001a 002200`);

Deno.test("decodeKubeProtobuf() decodes kubectl's ConfigMap and Secret bodies", () => {
  assert.deepEqual(decodeKubeProtobuf(CONFIGMAP), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "pbcm" },
    data: { a: "b", c: "d" },
  });
  assert.deepEqual(decodeKubeProtobuf(SECRET), {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "pbs" },
    data: { k: "dg==" },
  });
});

Deno.test("decodeKubeProtobuf() rejects bodies without magic or of unsupported kinds", () => {
  assert.throws(() => decodeKubeProtobuf(new Uint8Array([1, 2, 3, 4, 5])), ProtobufDecodeError);
  const deployment = hex("6b387300 0a15 0a07 61707073 2f7631 120a 4465706c 6f796d65 6e74 1200");
  assert.throws(
    () => decodeKubeProtobuf(deployment),
    /not supported for apps\/v1, Kind=Deployment/,
  );
});
