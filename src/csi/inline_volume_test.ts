import assert from "node:assert/strict";
import {
  inlineAuthenticationProblem,
  inlineAuthenticationSource,
  inlineVolumeHandle,
  splitMountOptions,
} from "./inline_volume.ts";

Deno.test("inlineVolumeHandle() is kubelet's makeVolumeHandle: csi-<sha256(podUID + name)>", () => {
  // printf %s udata | sha256sum
  assert.equal(
    inlineVolumeHandle("u", "data"),
    "csi-5614948e44ad9a8e10c8c91fa3841f396424f8db984291f95b18b37fe18c4797",
  );
  assert.notEqual(inlineVolumeHandle("u2", "data"), inlineVolumeHandle("u", "data"));
});

Deno.test("splitMountOptions() splits on commas and drops blanks", () => {
  assert.deepEqual(splitMountOptions(" allow-delete, prefix=a/ ,,region=eu-1"), [
    "allow-delete",
    "prefix=a/",
    "region=eu-1",
  ]);
  assert.deepEqual(splitMountOptions(undefined), []);
});

Deno.test("inline volumes use the pod's own Secret, never the driver's credentials", () => {
  assert.equal(inlineAuthenticationSource(undefined), "secret");
  assert.equal(inlineAuthenticationSource(""), "secret");
  assert.equal(inlineAuthenticationProblem("secret", true), undefined);
  assert.match(
    inlineAuthenticationProblem("driver", true)!,
    /cannot use authenticationSource "driver"/,
  );
  assert.match(inlineAuthenticationProblem("secret", false)!, /has no nodePublishSecretRef/);
});
