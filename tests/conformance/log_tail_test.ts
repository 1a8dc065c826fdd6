import assert from "node:assert/strict";
import { formatLogTails, logTail } from "./_log_tail.ts";

Deno.test("logTail() keeps the last lines, strips colours and marks a cut", () => {
  assert.equal(logTail(""), "");
  assert.equal(logTail("a\nb\n"), "a\nb");
  assert.equal(logTail("\x1b[31merror\x1b[0m: x\n"), "error: x");
  const many = Array.from({ length: 100 }, (_, i) => `line ${i}`).join("\n");
  const tail = logTail(many, 3);
  assert.equal(tail, "[...]\nline 97\nline 98\nline 99");
  const long = `${"x".repeat(50)}\n${"y".repeat(10)}\n${"z".repeat(10)}`;
  // The last 25 characters start inside the x line, which is dropped whole.
  assert.equal(logTail(long, 10, 25), `[...]\n${"y".repeat(10)}\n${"z".repeat(10)}`);
});

Deno.test("formatLogTails() names both processes and says when one logged nothing", () => {
  const out = formatLogTails({ node: "n1\nn2", controller: "" }, "a spec failed");
  assert.match(out, /^=== a spec failed\n--- node plugin \(s3-csi-node\)/);
  assert.match(
    out,
    /n1\nn2\n--- controller \(s3-csi-controller\): last lines of its log ---\n\(nothing logged\)\n===$/,
  );
});
