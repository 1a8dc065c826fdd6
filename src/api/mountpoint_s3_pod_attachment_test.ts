import assert from "node:assert/strict";
import { S3PA_FIELDS, s3paCrd } from "./mountpoint_s3_pod_attachment.ts";

// deno-lint-ignore no-explicit-any
type Any = any;

Deno.test("s3paCrd() declares the v2 cluster-scoped CRD with short name s3pa", () => {
  const crd = s3paCrd() as Any;
  assert.equal(crd.metadata.name, "mountpoints3podattachments.s3.csi.scality.com");
  assert.equal(crd.spec.group, "s3.csi.scality.com");
  assert.equal(crd.spec.scope, "Cluster");
  assert.deepEqual(crd.spec.names.shortNames, ["s3pa"]);
  assert.equal(crd.spec.versions.length, 1);
  const v = crd.spec.versions[0];
  assert.equal(v.name, "v2");
  assert.ok(v.served && v.storage);
});

// Printer columns are the upstream CRD's (`charts/scality-mountpoint-s3-csi-driver/crds/` in
// github.com/scality/mountpoint-s3-csi-driver); upstream selects on `spec.nodeName` only, we on
// every key field.
Deno.test("s3paCrd() printer columns are upstream's; every key field is selectable", () => {
  const v = (s3paCrd() as Any).spec.versions[0];
  assert.deepEqual(v.additionalPrinterColumns.map((c: Any) => [c.name, c.jsonPath]), [
    ["Node", ".spec.nodeName"],
    ["PV Name", ".spec.persistentVolumeName"],
    ["Mount Options", ".spec.mountOptions"],
    ["Age", ".metadata.creationTimestamp"],
  ]);
  assert.deepEqual(
    v.selectableFields.map((f: Any) => f.jsonPath),
    Object.values(S3PA_FIELDS).map((f) => `.${f}`),
  );
  assert.ok(v.selectableFields.length <= 8, "Kubernetes allows at most 8 selectable fields");
});

Deno.test("s3paCrd() schema requires every key field and types the attachment map", () => {
  const spec = (s3paCrd() as Any).spec.versions[0].schema.openAPIV3Schema.properties.spec;
  for (const f of Object.keys(S3PA_FIELDS)) {
    assert.ok(spec.required.includes(f), `${f} must be required`);
    assert.equal(spec.properties[f].type, "string");
  }
  const items = spec.properties.mountpointS3PodAttachments.additionalProperties.items;
  assert.deepEqual(items.required, ["workloadPodUID", "attachmentTime"]);
  assert.equal(items.properties.attachmentTime.format, "date-time");
});
