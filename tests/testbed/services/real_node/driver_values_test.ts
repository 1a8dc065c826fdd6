import assert from "node:assert/strict";
import { DRIVER_VERSION } from "../../../../src/util/version.ts";
import { resolveValues } from "../../../../src/deploy/values_validate.ts";
import { driverValues } from "./driver_values.ts";

const node = { imagePrefix: "localhost/s3csi-testbed" };
const s3 = {
  endpoint: "http://192.0.2.2:9000",
  region: "us-east-1",
  accessKeyId: "a",
  secretAccessKey: "b",
};

Deno.test("driverValues(): this tree's version by default, another build's for an upgrade; valid values", () => {
  const tagOf = (v: unknown) => (v as { image: { tag: string } }).image.tag;
  assert.equal(tagOf(driverValues(node, s3)), DRIVER_VERSION);
  const b = driverValues(node, s3, "0.1.1-upgrade-test");
  assert.equal(tagOf(b), "0.1.1-upgrade-test");
  // What deno task deploy makes of it (S3CSI_VERSION sets the values version too).
  const v = resolveValues({ version: "0.1.1-upgrade-test" }, b);
  assert.equal(v.image.tag, "0.1.1-upgrade-test");
  assert.equal(v.image.pullPolicy, "Never");
});
