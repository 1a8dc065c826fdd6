import assert from "node:assert/strict";
import { DRIVER_VERSION, versionProblem } from "./version.ts";

Deno.test("versionProblem(): semver without build metadata, usable as an image tag and a label", () => {
  for (const ok of [DRIVER_VERSION, "0.1.0", "1.2.3-rc.1", "0.1.1-upgrade-b", "10.20.30-a.b-c"]) {
    assert.equal(versionProblem(ok), undefined, ok);
  }
  for (const bad of ["", "1.2", "v1.2.3", "1.2.3+build", "1.2.3-", "1.2.3 ", "1.2.3-a/b"]) {
    assert.match(versionProblem(bad) ?? "", /is not a version/, bad);
  }
  assert.match(versionProblem(`1.2.3-${"a".repeat(60)}`) ?? "", /longer than 63/);
});
