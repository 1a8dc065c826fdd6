import assert from "node:assert/strict";
import { validateCustomResource } from "./schema_validate.ts";
import { S3PA_SCHEMA } from "../../../src/api/mountpoint_s3_pod_attachment.ts";

const valid = {
  apiVersion: "s3.csi.scality.com/v2",
  kind: "MountpointS3PodAttachment",
  metadata: { name: "a", labels: { x: "y" } },
  spec: {
    nodeName: "n1",
    persistentVolumeName: "pv",
    volumeID: "vol",
    mountOptions: "",
    workloadFSGroup: "",
    authenticationSource: "driver",
    mountpointS3PodAttachments: {
      mp1: [{ workloadPodUID: "u", attachmentTime: "2026-01-01T00:00:00Z" }],
    },
  },
};

Deno.test("validateCustomResource() accepts a valid s3pa and prunes unknown fields", () => {
  const r = validateCustomResource(
    { ...valid, top: "level", spec: { ...valid.spec, extra: 1 } },
    S3PA_SCHEMA as unknown as Record<string, unknown>,
  );
  assert.deepEqual(r.causes, []);
  assert.deepEqual(r.unknownFields.sort(), ["spec.extra", "top"]);
  assert.equal("top" in r.value, false);
  assert.deepEqual(r.value.metadata, valid.metadata);
});

Deno.test("validateCustomResource() reports type, required, enum, pattern and minLength", () => {
  const { workloadFSGroup: _, ...spec } = valid.spec;
  const r = validateCustomResource(
    {
      ...valid,
      spec: { ...spec, nodeName: 5, volumeID: "", authenticationSource: "x", mountOptions: "a" },
    },
    S3PA_SCHEMA as unknown as Record<string, unknown>,
  );
  const fields = r.causes.map((c) => `${c.field}:${c.reason}`).sort();
  assert.deepEqual(fields, [
    "spec.authenticationSource:FieldValueNotSupported",
    "spec.nodeName:FieldValueTypeInvalid",
    "spec.volumeID:FieldValueInvalid",
    "spec.workloadFSGroup:FieldValueRequired",
  ]);
  const bad = validateCustomResource(
    { ...valid, spec: { ...valid.spec, workloadFSGroup: "abc" } },
    S3PA_SCHEMA as unknown as Record<string, unknown>,
  );
  assert.match(bad.causes[0]!.message, /should match/);
});

Deno.test("validateCustomResource() applies defaults", () => {
  const schema = {
    type: "object",
    properties: {
      spec: {
        type: "object",
        properties: { color: { type: "string", default: "blue" }, n: { type: "integer" } },
      },
    },
  };
  const r = validateCustomResource({ spec: { n: 1 } }, schema);
  assert.deepEqual(r.value.spec, { n: 1, color: "blue" });
});
