import assert from "node:assert/strict";
import { classifyS3Error } from "./aws_bucket_store.ts";

function sdkError(name: string, status: number): Error {
  return Object.assign(new Error(name === "UnknownError" ? "UnknownError" : `${name} message`), {
    name,
    $metadata: { httpStatusCode: status },
  });
}

Deno.test("classifyS3Error maps SDK and fetch failures to kinds", () => {
  const cases: [unknown, string][] = [
    [sdkError("AccessDenied", 403), "access-denied"],
    [sdkError("Forbidden", 403), "access-denied"],
    [sdkError("InvalidAccessKeyId", 403), "bad-credentials"],
    [sdkError("SignatureDoesNotMatch", 403), "bad-credentials"],
    [sdkError("BucketAlreadyExists", 409), "bucket-taken"],
    [sdkError("BucketNotEmpty", 409), "not-empty"],
    [sdkError("NoSuchBucket", 404), "no-such-bucket"],
    [sdkError("NotFound", 404), "no-such-bucket"],
    [sdkError("InvalidBucketName", 400), "invalid-bucket-name"],
    [sdkError("InvalidLocationConstraint", 400), "invalid-region"],
    [sdkError("InternalError", 500), "other"],
    [new TypeError("fetch failed", { cause: new Error("connection refused") }), "unreachable"],
  ];
  for (const [err, kind] of cases) {
    assert.equal(classifyS3Error(err).kind, kind, String((err as Error).name));
  }
  const refused = classifyS3Error(
    new TypeError("fetch failed", { cause: new Error("tcp connect error: Connection refused") }),
  );
  assert.match(refused.message, /fetch failed: tcp connect error: Connection refused/);
  assert.equal(classifyS3Error(sdkError("InternalError", 503)).status, 503);
});
