import assert from "node:assert/strict";
import { TimeoutError } from "../util/errors.ts";
import { classifyProbeError } from "./bucket_probe.ts";

Deno.test("classifyProbeError() maps S3 answers to reasons", () => {
  const http = (status: number, name = "Error") => ({
    name,
    $metadata: { httpStatusCode: status },
  });
  assert.equal(classifyProbeError(http(404, "NotFound")).ok, false);
  assert.deepEqual(
    [404, 403, 500].map((s) => (classifyProbeError(http(s)) as { reason: string }).reason),
    ["no-such-bucket", "access-denied", "other"],
  );
  assert.equal(
    (classifyProbeError(new TimeoutError("x", 5)) as { reason: string }).reason,
    "unreachable",
  );
});
