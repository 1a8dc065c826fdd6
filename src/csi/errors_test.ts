import assert from "node:assert/strict";
import {
  Code,
  codeName,
  CsiError,
  failedPrecondition,
  invalidArgument,
  notFound,
  toStatus,
  unimplemented,
} from "./errors.ts";

Deno.test("toStatus() keeps CSI codes and maps other errors to INTERNAL", () => {
  assert.deepEqual(toStatus(invalidArgument("Volume ID not provided")), {
    code: Code.INVALID_ARGUMENT,
    message: "Volume ID not provided",
  });
  assert.equal(toStatus(notFound("x")).code, Code.NOT_FOUND);
  assert.equal(toStatus(failedPrecondition("x")).code, Code.FAILED_PRECONDITION);
  assert.equal(toStatus(unimplemented("NodeStageVolume")).code, Code.UNIMPLEMENTED);
  assert.deepEqual(toStatus(new TypeError("boom")), {
    code: Code.INTERNAL,
    message: "Internal error: boom",
  });
  assert.deepEqual(toStatus("weird"), { code: Code.INTERNAL, message: "Internal error: weird" });
});

Deno.test("codeName() names gRPC codes", () => {
  assert.equal(codeName(Code.OK), "OK");
  assert.equal(codeName(Code.INVALID_ARGUMENT), "INVALID_ARGUMENT");
  assert.equal(new CsiError(Code.ABORTED, "x").name, "CsiError");
});

Deno.test("toStatus() maps what a cancelled or timed-out call throws", () => {
  const deadline = new AbortController();
  const reason = new Error("The deadline of /csi.v1.Node/NodePublishVolume (20S) passed");
  reason.name = "DeadlineExceededError";
  deadline.abort(reason);
  assert.deepEqual(toStatus(new Error("aborted wait"), deadline.signal), {
    code: Code.DEADLINE_EXCEEDED,
    message: reason.message,
  });
  const gone = new AbortController();
  gone.abort(new Error("client went away"));
  assert.equal(toStatus(new Error("x"), gone.signal).code, Code.CANCELLED);
  // A CSI error keeps its code even when the call was cancelled meanwhile.
  assert.equal(toStatus(invalidArgument("x"), gone.signal).code, Code.INVALID_ARGUMENT);
  const timeout = new Error("Timed out");
  timeout.name = "TimeoutError";
  assert.equal(toStatus(timeout).code, Code.DEADLINE_EXCEEDED);
});

Deno.test("toStatus(): no URL user or password in a status message (it becomes an Event)", () => {
  const proxy = "http://proxyuser:proxypass@proxy.corp:3128";
  for (const err of [failedPrecondition(`S3 unreachable through ${proxy}`), new Error(proxy)]) {
    const { message } = toStatus(err);
    assert.doesNotMatch(message, /proxyuser|proxypass/, message);
    assert.match(message, /http:\/\/\[REDACTED\]@proxy\.corp:3128/);
  }
});
