import assert from "node:assert/strict";
import {
  encodeMountMessage,
  MAX_MOUNT_MESSAGE_BYTES,
  type MountMessage,
  MountMessageError,
  parseMountMessage,
  protocolOf,
} from "./mount_message.ts";

const enc = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));

Deno.test("encodeMountMessage() and parseMountMessage() round-trip", () => {
  const msg: MountMessage = {
    bucketName: "my-bucket",
    args: ["--allow-delete", "--region=us-east-1"],
    env: ["AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/comm/credentials/c"],
    volumeId: "vol-1",
    engine: "rclone",
  };
  assert.deepEqual(parseMountMessage(encodeMountMessage(msg)), msg);
});

Deno.test("protocol 2 carries the session; protocol 1 (no version) is still read", () => {
  const v2: MountMessage = {
    protocolVersion: 2,
    bucketName: "my-bucket",
    args: [],
    env: [],
    engine: "mount-s3",
    session: { id: "0123456789abcdef0123456789abcdef", resume: true },
  };
  assert.deepEqual(parseMountMessage(encodeMountMessage(v2)), v2);
  const v1 = { bucketName: "my-bucket", args: [], env: [] };
  assert.deepEqual(parseMountMessage(enc(v1)), v1);
  assert.equal(protocolOf(parseMountMessage(enc(v1))), 1);
});

Deno.test("parseMountMessage() rejects malformed input with a clear error", async (t) => {
  const ok = { bucketName: "b1", args: [], env: [] };
  const cases: [string, Uint8Array, RegExp][] = [
    ["not json", enc("{nope"), /not valid UTF-8 JSON/],
    ["invalid utf-8", new Uint8Array([0xff, 0xfe]), /not valid UTF-8 JSON/],
    ["array", enc([1]), /must be a JSON object/],
    ["missing bucket", enc({ args: [], env: [] }), /bucketName/],
    ["bad bucket", enc({ ...ok, bucketName: "../etc" }), /bucketName/],
    ["args not array", enc({ ...ok, args: "--x" }), /"args" must be an array/],
    ["arg without dashes", enc({ ...ok, args: ["foreground"] }), /args\[0\]/],
    ["arg with newline", enc({ ...ok, args: ["--a=b\nc"] }), /args\[0\]/],
    ["env malformed", enc({ ...ok, env: ["NOEQUALS"] }), /env\[0\]/],
    ["unknown engine", enc({ ...ok, engine: "s3fs" }), /"engine" must be one of mount-s3, rclone/],
    ["unknown field", enc({ ...ok, fd: 3 }), /unknown fields: fd/],
    ["oversize", new Uint8Array(MAX_MOUNT_MESSAGE_BYTES + 1), /larger than/],
    [
      "a newer protocol",
      enc({ ...ok, protocolVersion: 3 }),
      /protocol 3 is not supported by this mounter \(it speaks 1 to 2\)/,
    ],
    ["bad protocol", enc({ ...ok, protocolVersion: "2" }), /positive integer/],
    [
      "session in protocol 1",
      enc({ ...ok, session: { id: "x", resume: false } }),
      /unknown fields: session/,
    ],
    [
      "bad session id",
      enc({ ...ok, protocolVersion: 2, session: { id: "../x", resume: false } }),
      /"session" must be/,
    ],
    [
      "session with extra",
      enc({
        ...ok,
        protocolVersion: 2,
        session: { id: "0123456789abcdef0123456789abcdef", resume: false, dir: "/" },
      }),
      /"session" must be/,
    ],
  ];
  for (const [name, bytes, pattern] of cases) {
    await t.step(name, () => {
      assert.throws(
        () => parseMountMessage(bytes),
        (e: unknown) => e instanceof MountMessageError && pattern.test(e.message),
      );
    });
  }
});

Deno.test("encodeMountMessage() refuses an oversized message", () => {
  const env = Array.from({ length: 2000 }, (_, i) => `K${i}=${"v".repeat(40)}`);
  assert.throws(() => encodeMountMessage({ bucketName: "b1", args: [], env }), MountMessageError);
});

Deno.test("parseMountMessage(bytes, range): a mounter of another release reads its range only", () => {
  const ok = { bucketName: "bucket-1", args: [], env: [] };
  const next = { min: 2, max: 3 }; // the release after this one
  assert.equal(parseMountMessage(enc({ ...ok, protocolVersion: 2 }), next).protocolVersion, 2);
  assert.throws(
    () => parseMountMessage(enc(ok), next),
    /protocol 1 is not supported by this mounter \(it speaks 2 to 3\)/,
  );
});
