import assert from "node:assert/strict";
import {
  humanAge,
  type IncludeObject,
  includeObjectOf,
  simpleJsonPath,
  toTable,
  wantsTable,
} from "./table.ts";
import { typeFromCrd } from "./resources.ts";
import { s3paCrd } from "../../../src/api/mountpoint_s3_pod_attachment.ts";

Deno.test("humanAge() matches kubectl's short durations", () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  const at = (s: number) => humanAge("2026-01-01T00:00:00Z", t0 + s * 1000);
  assert.equal(at(0), "0s");
  assert.equal(at(119), "119s");
  assert.equal(at(123), "2m3s");
  assert.equal(at(600), "10m");
  assert.equal(at(3 * 3600 + 20 * 60), "3h20m");
  assert.equal(at(4 * 86400), "4d");
});

Deno.test("toTable() renders CRD printer columns", () => {
  const t = typeFromCrd(s3paCrd())!;
  const obj = {
    metadata: { name: "s3pa-1", creationTimestamp: "2026-01-01T00:00:00Z" },
    spec: { nodeName: "node-b", persistentVolumeName: "pv-1", mountOptions: "ro" },
  };
  const table = toTable(t, [obj], { resourceVersion: "5" }, {
    now: Date.parse("2026-01-01T00:00:04Z"),
  });
  assert.deepEqual((table.columnDefinitions as { name: string }[]).map((c) => c.name), [
    "Name",
    "Node",
    "PV Name",
    "Mount Options",
    "Age",
  ]);
  assert.deepEqual((table.rows as { cells: unknown[] }[])[0]!.cells, [
    "s3pa-1",
    "node-b",
    "pv-1",
    "ro",
    "4s",
  ]);
});

Deno.test("simpleJsonPath() and wantsTable() parse their inputs", () => {
  assert.equal(simpleJsonPath({ a: { b: [{ c: 1 }] } }, ".a.b[0].c"), 1);
  assert.equal(simpleJsonPath({}, ".x.y"), undefined);
  assert.equal(wantsTable("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"), true);
  assert.equal(wantsTable("application/json"), false);
});

Deno.test("toTable() rows carry metadata, the whole object (includeObject=Object, kubectl --sort-by) or nothing", () => {
  const t = typeFromCrd(s3paCrd())!;
  const obj = {
    metadata: { name: "s3pa-1", creationTimestamp: "2026-01-01T00:00:00Z" },
    spec: { nodeName: "node-b", persistentVolumeName: "pv-1", mountOptions: "ro" },
  };
  const row = (includeObject?: IncludeObject) =>
    (toTable(t, [obj], {}, { now: 0, ...(includeObject ? { includeObject } : {}) })
      .rows as { object: unknown }[])[0]!.object;
  assert.deepEqual(row(), {
    kind: "PartialObjectMetadata",
    apiVersion: "meta.k8s.io/v1",
    metadata: obj.metadata,
  });
  assert.deepEqual(row("Object"), {
    ...obj,
    kind: "MountpointS3PodAttachment",
    apiVersion: "s3.csi.scality.com/v2",
  });
  assert.equal(row("None"), null);
  assert.equal(includeObjectOf(new URLSearchParams("includeObject=Object")), "Object");
  assert.equal(includeObjectOf(new URLSearchParams("")), "Metadata");
  assert.throws(() => includeObjectOf(new URLSearchParams("includeObject=All")), /must be one of/);
});
