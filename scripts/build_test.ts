import assert from "node:assert/strict";
import { buildVersion, versionImportMap } from "./build.ts";

Deno.test("buildVersion(): --version, else S3CSI_VERSION, else deno.json's (undefined); checked", () => {
  assert.equal(buildVersion(undefined, undefined), undefined);
  assert.equal(buildVersion(undefined, ""), undefined);
  assert.equal(buildVersion(undefined, "0.1.1-b"), "0.1.1-b");
  assert.equal(buildVersion("0.2.0", "0.1.1-b"), "0.2.0");
  assert.throws(
    () => buildVersion(undefined, "v1"),
    /^Error: S3CSI_VERSION: "v1" is not a version/,
  );
  assert.throws(() => buildVersion("1.0.0+x", undefined), /^Error: --version: /);
});

Deno.test("versionImportMap(): deno.json's imports, and deno.json itself mapped to the copy", () => {
  const map = versionImportMap(
    { imports: { yaml: "npm:yaml@2.9.1" } },
    "file:///repo/deno.json",
    "file:///repo/dist/.version-0.1.1-b/deno.json",
  );
  assert.deepEqual(map, {
    imports: {
      yaml: "npm:yaml@2.9.1",
      "file:///repo/deno.json": "file:///repo/dist/.version-0.1.1-b/deno.json",
    },
  });
});
