import assert from "node:assert/strict";
import {
  checkServerVersion,
  parseServerVersion,
  UnsupportedServerError,
} from "./server_version.ts";

Deno.test("server version: major/minor as served by vendors, gitVersion as a fallback", () => {
  assert.deepEqual(parseServerVersion({ major: "1", minor: "31" }), { major: 1, minor: 31 });
  assert.deepEqual(parseServerVersion({ major: "1", minor: "30+" }), { major: 1, minor: 30 });
  assert.deepEqual(parseServerVersion({ major: "", minor: "", gitVersion: "v1.33.1-eks-1" }), {
    major: 1,
    minor: 33,
  });
  assert.equal(parseServerVersion({ gitVersion: "devel" }), undefined);
});

Deno.test("server version: 1.31 and newer pass; older ones are refused with what to do", () => {
  assert.equal(
    checkServerVersion({ major: "1", minor: "31", gitVersion: "v1.31.0" }, "S"),
    "v1.31.0",
  );
  assert.equal(checkServerVersion({ major: "2", minor: "0" }, "S"), "2.0");
  assert.throws(
    () =>
      checkServerVersion({ major: "1", minor: "30+", gitVersion: "v1.30.9-gke.1" }, "https://k"),
    (e: unknown) =>
      e instanceof UnsupportedServerError &&
      /https:\/\/k runs Kubernetes v1\.30\.9-gke\.1; the S3 CSI driver needs 1\.31 or newer .*selectableFields.*nothing was applied/
        .test(e.message),
  );
  assert.throws(() => checkServerVersion({}, "S"), /no version we can read/);
});
