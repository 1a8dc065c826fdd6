import assert from "node:assert/strict";
import type { PersistentVolume, Pod } from "./k8s_types.ts";
import {
  buildPublishRequest,
  csiAccessMode,
  decodeSecretData,
  inlineVolumeSpec,
} from "./publish_request.ts";

const pod = {
  metadata: { name: "p", namespace: "ns", uid: "u" },
  spec: { containers: [], serviceAccountName: "sa", securityContext: { fsGroup: 42 } },
} as unknown as Pod;
const pv = {
  metadata: { name: "pv" },
  spec: {
    accessModes: ["ReadOnlyMany", "ReadWriteMany"],
    mountOptions: ["b", "a"],
    csi: { driver: "d", volumeHandle: "h", volumeAttributes: { bucketName: "x" } },
  },
} as unknown as PersistentVolume;

Deno.test("access mode comes from the PV's first mode, per the SINGLE_NODE_MULTI_WRITER mapper", () => {
  assert.equal(csiAccessMode(undefined, false), "SINGLE_NODE_WRITER");
  assert.equal(csiAccessMode(["ReadWriteOnce"], true), "SINGLE_NODE_MULTI_WRITER");
  assert.equal(csiAccessMode(["ReadWriteOncePod"], false), "SINGLE_NODE_WRITER");
  assert.equal(csiAccessMode(["ReadWriteOncePod"], true), "SINGLE_NODE_SINGLE_WRITER");
  assert.equal(csiAccessMode(["ReadWriteMany", "ReadOnlyMany"], false), "MULTI_NODE_MULTI_WRITER");
  assert.equal(csiAccessMode(["Bogus"], false), "UNKNOWN");
});

Deno.test("publish request: pod info only with podInfoOnMount, mount group only when advertised", () => {
  const base = {
    kubeletRoot: "/k",
    pod,
    pv,
    readOnly: false,
    secrets: undefined,
    singleNodeMultiWriter: false,
  };
  const r = buildPublishRequest({ ...base, podInfoOnMount: false, volumeMountGroup: false });
  assert.deepEqual(r, {
    volumeId: "h",
    targetPath: "/k/pods/u/volumes/kubernetes.io~csi/pv/mount",
    volumeCapability: {
      mount: { fsType: "", mountFlags: ["b", "a"], volumeMountGroup: "" },
      accessMode: { mode: "MULTI_NODE_READER_ONLY" },
    },
    readonly: false,
    volumeContext: { bucketName: "x" },
  });
  const r2 = buildPublishRequest({
    ...base,
    podInfoOnMount: true,
    volumeMountGroup: true,
    secrets: { k: "v" },
  });
  assert.equal(r2.volumeCapability?.mount?.volumeMountGroup, "42");
  assert.equal(r2.volumeContext?.["csi.storage.k8s.io/serviceAccount.name"], "sa");
  assert.equal(r2.volumeContext?.["csi.storage.k8s.io/ephemeral"], "false");
  assert.deepEqual(r2.secrets, { k: "v" });
});

Deno.test("publish request of an inline volume: per-pod handle, pod volume name, ephemeral true", () => {
  const spec = inlineVolumeSpec(pod, {
    name: "data",
    csi: {
      driver: "d",
      readOnly: true,
      volumeAttributes: { bucketName: "x" },
      nodePublishSecretRef: { name: "s" },
    },
  });
  // kubelet's makeVolumeHandle: sha256 of the pod UID and the volume name, concatenated
  // (`printf %s udata | sha256sum`).
  assert.equal(
    spec.spec.csi!.volumeHandle,
    "csi-5614948e44ad9a8e10c8c91fa3841f396424f8db984291f95b18b37fe18c4797",
  );
  assert.deepEqual(spec.spec.csi!.nodePublishSecretRef, { name: "s", namespace: "ns" });
  const r = buildPublishRequest({
    kubeletRoot: "/k",
    pod,
    pv: spec,
    readOnly: true,
    ephemeral: true,
    podInfoOnMount: true,
    secrets: { access_key_id: "a" },
    volumeMountGroup: false,
    singleNodeMultiWriter: false,
  });
  assert.equal(r.targetPath, "/k/pods/u/volumes/kubernetes.io~csi/data/mount");
  assert.equal(r.volumeId, spec.spec.csi!.volumeHandle);
  assert.equal(r.readonly, true);
  assert.deepEqual(r.volumeCapability?.mount?.mountFlags, []);
  assert.equal(r.volumeCapability?.accessMode?.mode, "SINGLE_NODE_WRITER");
  assert.equal(r.volumeContext?.["csi.storage.k8s.io/ephemeral"], "true");
});

Deno.test("secret data is base64-decoded as UTF-8", () => {
  assert.deepEqual(decodeSecretData({ a: btoa("hello"), b: "w6k=" }), { a: "hello", b: "é" });
});
