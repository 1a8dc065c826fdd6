import assert from "node:assert/strict";
import { mergePatch } from "./patch_merge.ts";
import { jsonPatch, JsonPatchError } from "./patch_json.ts";
import { strategicMerge } from "./patch_strategic.ts";

const pod = {
  metadata: { labels: { a: "1", remove: "x" } },
  spec: {
    containers: [
      { name: "main", image: "busybox:1", env: [{ name: "A", value: "1" }] },
      { name: "side", image: "busybox:1.35" },
    ],
    tolerations: [{ key: "t" }],
  },
};

Deno.test("mergePatch() merges maps, deletes null, replaces lists", () => {
  const out = mergePatch(pod, {
    metadata: { labels: { remove: null, b: "2" } },
    spec: { containers: [{ name: "side", image: "x" }] },
  }) as typeof pod;
  assert.deepEqual(out.metadata.labels, { a: "1", b: "2" });
  assert.equal(out.spec.containers.length, 1);
  assert.equal(pod.spec.containers.length, 2, "input untouched");
});

Deno.test("jsonPatch() applies ops and reports a failing test op", () => {
  const out = jsonPatch(pod, [
    { op: "replace", path: "/spec/containers/1/image", value: "busybox:1.36" },
    { op: "add", path: "/metadata/labels/x~1y", value: "y" },
    { op: "remove", path: "/metadata/labels/remove" },
    { op: "add", path: "/spec/tolerations/-", value: { key: "u" } },
    { op: "copy", from: "/metadata/labels/a", path: "/metadata/labels/c" },
    { op: "move", from: "/metadata/labels/c", path: "/metadata/labels/d" },
  ]) as typeof pod;
  assert.equal(out.spec.containers[1]!.image, "busybox:1.36");
  assert.deepEqual(out.metadata.labels, { a: "1", "x/y": "y", d: "1" });
  assert.equal(out.spec.tolerations.length, 2);
  assert.throws(
    () => jsonPatch(pod, [{ op: "test", path: "/metadata/labels/a", value: "2" }]),
    (e) => e instanceof JsonPatchError && e.testFailed,
  );
  assert.throws(() => jsonPatch(pod, { not: "an array" }), /cannot unmarshal object/);
});

Deno.test("strategicMerge() merges containers by name and honours directives", () => {
  const out = strategicMerge(pod, {
    metadata: { labels: { remove: null } },
    spec: {
      "$setElementOrder/containers": [{ name: "side" }, { name: "main" }],
      containers: [
        { name: "side", image: "busybox:1.36" },
        { name: "main", env: [{ name: "B", value: "2" }] },
      ],
      tolerations: [{ key: "new" }],
    },
  }) as typeof pod;
  assert.deepEqual(out.spec.containers.map((c) => c.name), ["side", "main"]);
  assert.equal(out.spec.containers[0]!.image, "busybox:1.36");
  assert.deepEqual(out.spec.containers[1]!.env!.map((e) => e.name), ["A", "B"]);
  assert.deepEqual(out.spec.tolerations, [{ key: "new" }], "atomic list replaced");
  assert.deepEqual(out.metadata.labels, { a: "1" });
  const del = strategicMerge(pod, {
    spec: { containers: [{ name: "side", $patch: "delete" }] },
  }) as typeof pod;
  assert.deepEqual(del.spec.containers.map((c) => c.name), ["main"]);
  const fin = strategicMerge({ metadata: { finalizers: ["a"] } }, {
    metadata: { finalizers: ["b", "a"] },
  });
  assert.deepEqual(fin, { metadata: { finalizers: ["a", "b"] } });
});
