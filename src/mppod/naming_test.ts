import assert from "node:assert/strict";
import { mountpointPodName, s3paName, type SharingKey } from "./naming.ts";

const KEY: SharingKey = {
  nodeName: "node-1",
  persistentVolumeName: "pv-1",
  volumeID: "vol-1",
  mountOptions: "allow-delete",
  workloadFSGroup: "",
  authenticationSource: "driver",
  driverVersion: "0.1.0",
};

Deno.test("s3paName() is deterministic and valid as a DNS-1123 name", () => {
  assert.equal(s3paName(KEY), s3paName({ ...KEY }));
  assert.match(s3paName(KEY), /^s3pa-[0-9a-f]{40}$/);
});

Deno.test("s3paName() changes with every part of the sharing key", () => {
  const variants: Partial<SharingKey>[] = [
    { nodeName: "node-2" },
    { persistentVolumeName: "pv-2" },
    { volumeID: "vol-2" },
    { mountOptions: "" },
    { workloadFSGroup: "1000" },
    { authenticationSource: "secret", secretNamespace: "ns", secretName: "s" },
    { driverVersion: "0.2.0" },
  ];
  const names = new Set([s3paName(KEY), ...variants.map((v) => s3paName({ ...KEY, ...v }))]);
  assert.equal(names.size, variants.length + 1);
});

Deno.test("mountpointPodName() is deterministic per S3PA and index", () => {
  const s = s3paName(KEY);
  assert.equal(mountpointPodName(s, 0), mountpointPodName(s, 0));
  assert.notEqual(mountpointPodName(s, 0), mountpointPodName(s, 1));
  assert.match(mountpointPodName(s, 0), /^mp-[0-9a-f]{40}$/);
  assert.ok(mountpointPodName(s, 0).length <= 63);
});
