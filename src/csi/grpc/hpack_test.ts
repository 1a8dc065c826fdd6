import assert from "node:assert/strict";
import {
  encodeHeaders,
  HpackDecoder,
  HpackError,
  huffmanDecode,
  MAX_INTEGER,
  MAX_INTEGER_CONTINUATION_BYTES,
} from "./hpack.ts";

const hex = (s: string) =>
  Uint8Array.from(s.replace(/\s+/g, "").match(/../g)!.map((b) => parseInt(b, 16)));

Deno.test("hpack: RFC 7541 C.2 single representations", () => {
  const d = new HpackDecoder();
  assert.deepEqual(
    d.decode(hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")),
    [["custom-key", "custom-header"]],
  );
  assert.equal(d.tableSize, 55);
  assert.deepEqual(d.decode(hex("040c 2f73 616d 706c 652f 7061 7468")), [[
    ":path",
    "/sample/path",
  ]]);
  assert.deepEqual(d.decode(hex("1008 7061 7373 776f 7264 0673 6563 7265 74")), [[
    "password",
    "secret",
  ]]);
  assert.deepEqual(d.decode(hex("82")), [[":method", "GET"]]);
  assert.equal(d.tableSize, 55);
});

const REQUESTS = [
  [[":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"]],
  [
    [":method", "GET"],
    [":scheme", "http"],
    [":path", "/"],
    [":authority", "www.example.com"],
    ["cache-control", "no-cache"],
  ],
  [
    [":method", "GET"],
    [":scheme", "https"],
    [":path", "/index.html"],
    [":authority", "www.example.com"],
    ["custom-key", "custom-value"],
  ],
];

Deno.test("hpack: RFC 7541 C.3 requests without Huffman coding share the dynamic table", () => {
  const d = new HpackDecoder();
  assert.deepEqual(d.decode(hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")), REQUESTS[0]);
  assert.equal(d.tableSize, 57);
  assert.deepEqual(d.decode(hex("8286 84be 5808 6e6f 2d63 6163 6865")), REQUESTS[1]);
  assert.equal(d.tableSize, 110);
  assert.deepEqual(
    d.decode(hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")),
    REQUESTS[2],
  );
  assert.equal(d.tableSize, 164);
});

Deno.test("hpack: RFC 7541 C.4 requests with Huffman coding", () => {
  const d = new HpackDecoder();
  assert.deepEqual(d.decode(hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")), REQUESTS[0]);
  assert.deepEqual(d.decode(hex("8286 84be 5886 a8eb 1064 9cbf")), REQUESTS[1]);
  assert.deepEqual(
    d.decode(hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")),
    REQUESTS[2],
  );
  assert.equal(d.tableSize, 164);
});

Deno.test("hpack: a table size update evicts, and one above our setting is refused", () => {
  const d = new HpackDecoder({ maxTableSize: 4096 });
  d.decode(hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"));
  assert.equal(d.tableSize, 55);
  assert.deepEqual(d.decode(hex("20")), []);
  assert.equal(d.tableSize, 0);
  assert.throws(() => d.decode(hex("3fe21f")), HpackError); // 4097 > 4096
  assert.throws(() => new HpackDecoder().decode(hex("82 20")), HpackError); // after a field
});

Deno.test("hpack: malformed blocks are HpackErrors, never other exceptions", () => {
  const bad = [
    "80", // index 0
    "ff 00", // index 127 + 0 = beyond the tables
    "40", // truncated literal
    "400a 6375", // string shorter than its length
    "7f ff ff ff ff 7f", // huge integer
    "0085 ffff ffff ff", // Huffman string with EOS
    "0081 00", // Huffman padding that is not all ones
    "00 0f", // truncated length
  ];
  for (const b of bad) assert.throws(() => new HpackDecoder().decode(hex(b)), HpackError, b);
  assert.throws(() => huffmanDecode(hex("ff ff ff ff")), HpackError);
});

Deno.test("hpack: the header list size limit holds", () => {
  const d = new HpackDecoder({ maxHeaderListSize: 100 });
  const big = encodeHeaders([["x", "a".repeat(200)]]);
  assert.throws(() => d.decode(big), HpackError);
});

Deno.test("hpack: encodeHeaders round-trips through the decoder, with a table size update", () => {
  const fields: [string, string][] = [
    [":status", "200"],
    ["content-type", "application/grpc"],
    ["grpc-message", "x".repeat(300)],
  ];
  const block = encodeHeaders(fields, 0);
  assert.equal(block[0], 0x20);
  assert.deepEqual(new HpackDecoder().decode(block), fields);
});

/** A 5-bit-prefix table size update whose continuation is `run` bytes of 0x80, then 0x00. */
const nanTableSizeUpdate = (run: number) => Uint8Array.from([0x3f, ...Array(run).fill(0x80), 0]);

Deno.test("hpack: an integer whose encoding is too long is refused before its value turns NaN", () => {
  // 150 bytes of 0x80 push the shift past 2^1023: `0 * 2 ** shift` is NaN, which no `>` catches.
  for (const run of [150, 6, MAX_INTEGER_CONTINUATION_BYTES]) {
    assert.throws(
      () => new HpackDecoder().decode(nanTableSizeUpdate(run)),
      (err: unknown) => err instanceof HpackError && /too long/.test(err.message),
      `a run of ${run}`,
    );
  }
  // The longest accepted encoding: 4 zero continuation bytes (not minimal, but within the cap).
  assert.deepEqual(new HpackDecoder().decode(hex("3f 80 80 80 00")), []); // size 31
  // Values: MAX_INTEGER is accepted as an integer (then too big an index); one more is not.
  const index = (v: number) => {
    const out = [0xff];
    let rest = v - 127;
    while (rest >= 0x80) {
      out.push((rest & 0x7f) | 0x80);
      rest = Math.floor(rest / 0x80);
    }
    out.push(rest);
    return Uint8Array.from(out);
  };
  assert.throws(() => new HpackDecoder().decode(index(MAX_INTEGER)), /beyond the dynamic table/);
  assert.throws(() => new HpackDecoder().decode(index(MAX_INTEGER + 1)), /Integer too large/);
});

Deno.test("hpack: after any refused table size update, insertions are still evicted to the limit", () => {
  const d = new HpackDecoder({ maxTableSize: 4096 });
  assert.throws(() => d.decode(nanTableSizeUpdate(150)), HpackError);
  // The connection ends on a COMPRESSION_ERROR; even if a caller went on, the limit holds.
  const entry = encodeHeaders([["x-pad", "v".repeat(1000)]], undefined, true);
  for (let i = 0; i < 100; i++) assert.equal(d.decode(entry).length, 1);
  assert.ok(d.tableSize <= 4096, `table size ${d.tableSize}`);
  assert.equal(d.tableLimit, 4096);
});

Deno.test("hpack: limits that are not non-negative integers are refused at construction", () => {
  for (const bad of [NaN, -1, Infinity, 1.5]) {
    assert.throws(() => new HpackDecoder({ maxTableSize: bad }), RangeError);
    assert.throws(() => new HpackDecoder({ maxHeaderListSize: bad }), RangeError);
  }
});
