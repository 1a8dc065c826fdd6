import assert from "node:assert/strict";
import { DRIVER_VERSION } from "../util/version.ts";
import { renderManifests } from "./render.ts";
import { loadValues } from "./values_load.ts";
import { ValuesError } from "./values_validate.ts";

const images = (version?: string, set?: string) => {
  const v = loadValues(undefined, set, version);
  const objects = renderManifests(v);
  const json = JSON.stringify(objects);
  return {
    v,
    refs: [...new Set(json.match(/localhost\/x\/s3-csi-\w+:[^"]+/g) ?? [])].sort(),
    versions: [
      ...new Set(objects.map((o) => o.metadata?.labels?.["app.kubernetes.io/version"])),
    ],
  };
};

Deno.test("loadValues(version): S3CSI_VERSION deploys that version's images and labels", () => {
  const base = images(undefined, "image.registry=localhost/x");
  assert.equal(base.v.version, DRIVER_VERSION);
  assert.deepEqual(base.versions, [DRIVER_VERSION]);
  assert.ok(base.refs.every((r) => r.endsWith(`:${DRIVER_VERSION}`)), base.refs.join());

  const b = images("0.1.1-upgrade-b", "image.registry=localhost/x");
  assert.equal(b.v.version, "0.1.1-upgrade-b");
  assert.equal(b.v.image.tag, "0.1.1-upgrade-b");
  assert.deepEqual(b.versions, ["0.1.1-upgrade-b"], "every object labelled with it");
  assert.deepEqual(b.refs, [
    "localhost/x/s3-csi-controller:0.1.1-upgrade-b",
    "localhost/x/s3-csi-mounter:0.1.1-upgrade-b",
    "localhost/x/s3-csi-node:0.1.1-upgrade-b",
  ]);

  // The user's own tag still wins over the version's default.
  const pinned = images("0.1.1-upgrade-b", "image.registry=localhost/x,image.tag=7.0.0");
  assert.equal(pinned.v.version, "0.1.1-upgrade-b");
  assert.ok(pinned.refs.every((r) => r.endsWith(":7.0.0")), pinned.refs.join());
});

Deno.test("loadValues(version): a version that cannot be a tag or label is refused, naming it", () => {
  assert.throws(
    () => loadValues(undefined, undefined, "1.2.3+build"),
    (e: unknown) =>
      e instanceof ValuesError && /version: "1\.2\.3\+build" is not a version/.test(e.message),
  );
  assert.throws(() => loadValues(undefined, "version=latest"), ValuesError);
});
