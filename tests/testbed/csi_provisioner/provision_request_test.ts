import assert from "node:assert/strict";
import { bytesQuantity } from "../../../src/kube/quantity.ts";
import type { PersistentVolumeClaim } from "../../../src/kube/types.ts";
import {
  ANN,
  createVolumeRequest,
  persistentVolume,
  PV_FINALIZER,
  quantityBytes,
  secretRef,
  type StorageClass,
  stripParameters,
} from "./provision_request.ts";

const PVC: PersistentVolumeClaim = {
  metadata: {
    name: "data",
    namespace: "team-a",
    uid: "0f3c5a2e-1b2c-4d5e-8f90-123456789abc",
    resourceVersion: "7",
    annotations: { "example.com/owner": "alice" },
  },
  spec: {
    storageClassName: "s3",
    accessModes: ["ReadWriteMany", "ReadOnlyMany"],
    resources: { requests: { storage: "5Gi" } },
  },
};
const SC: StorageClass = {
  metadata: { name: "s3" },
  provisioner: "s3.csi.scality.com",
  reclaimPolicy: "Delete",
  mountOptions: ["allow-delete"],
  parameters: {
    mode: "bucket",
    "csi.storage.k8s.io/provisioner-secret-name":
      "${pvc.namespace}-${pvc.annotations['example.com/owner']}",
    "csi.storage.k8s.io/provisioner-secret-namespace": "${pvc.namespace}",
    "csi.storage.k8s.io/node-publish-secret-name": "${pv.name}",
    "csi.storage.k8s.io/node-publish-secret-namespace": "creds",
  },
};

Deno.test("CreateVolume request as csi-provisioner builds it", () => {
  const req = createVolumeRequest(PVC, SC);
  assert.equal(req.name, `pvc-${PVC.metadata.uid}`);
  assert.equal(req.capacityRange?.requiredBytes, 5 * 2 ** 30);
  assert.deepEqual(req.parameters, { mode: "bucket" });
  assert.deepEqual(req.volumeCapabilities?.map((c) => c.accessMode?.mode), [
    "MULTI_NODE_MULTI_WRITER",
    "MULTI_NODE_READER_ONLY",
  ]);
  assert.deepEqual(req.volumeCapabilities?.[0]?.mount?.mountFlags, ["allow-delete"]);
  assert.throws(
    () => stripParameters({ "csi.storage.k8s.io/unknown": "x" }),
    /unknown parameter key "csi.storage.k8s.io\/unknown" with reserved namespace/,
  );
});

Deno.test("secret templates resolve like the sidecar's", () => {
  const pv = `pvc-${PVC.metadata.uid}`;
  assert.deepEqual(secretRef(SC.parameters!, "provisioner", PVC, pv), {
    name: "team-a-alice",
    namespace: "team-a",
  });
  assert.deepEqual(secretRef(SC.parameters!, "node-publish", PVC, pv), {
    name: pv,
    namespace: "creds",
  });
  assert.equal(secretRef(SC.parameters!, "node-stage", PVC, pv), undefined);
  assert.throws(
    () =>
      secretRef(
        {
          "csi.storage.k8s.io/provisioner-secret-name": "x",
          "csi.storage.k8s.io/provisioner-secret-namespace": "${pvc.name}",
        },
        "provisioner",
        PVC,
        pv,
      ),
    /invalid tokens/,
  );
  assert.throws(
    () => secretRef({ "csi.storage.k8s.io/provisioner-secret-name": "x" }, "provisioner", PVC, pv),
    /both/,
  );
});

Deno.test("PV as csi-provisioner creates it", () => {
  const pv = persistentVolume(
    PVC,
    SC,
    {
      volumeId: "s3:1:b:e:s::bucket",
      capacityBytes: 5 * 2 ** 30,
      volumeContext: { bucketName: "bucket" },
    },
    "1-2-s3.csi.scality.com",
    {
      provisioner: { name: "team-a-alice", namespace: "team-a" },
      "node-publish": { name: "np", namespace: "creds" },
    },
  );
  assert.equal(pv.metadata.name, `pvc-${PVC.metadata.uid}`);
  assert.deepEqual(pv.metadata.finalizers, [PV_FINALIZER]);
  assert.equal(pv.metadata.annotations?.[ANN.deletionSecretName], "team-a-alice");
  assert.equal(pv.spec.capacity?.storage, "5Gi");
  assert.equal(pv.spec.csi?.volumeHandle, "s3:1:b:e:s::bucket");
  assert.equal(pv.spec.csi?.volumeAttributes?.bucketName, "bucket");
  assert.deepEqual(pv.spec.csi?.nodePublishSecretRef, { name: "np", namespace: "creds" });
  assert.equal(pv.spec.claimRef?.uid, PVC.metadata.uid);
  assert.equal(pv.spec.persistentVolumeReclaimPolicy, "Delete");
  assert.equal(quantityBytes("1.5Gi"), 1.5 * 2 ** 30);
  assert.equal(bytesQuantity(1000), "1000");
});
