import assert from "node:assert/strict";
import {
  attachmentId,
  csiDeviceDir,
  csiTargetPath,
  emptyDirPath,
  escapeQualifiedName,
  podVolData,
  uniqueVolumeName,
} from "./kubelet_paths.ts";

Deno.test("target and emptyDir paths have kubelet's shape", () => {
  assert.equal(
    csiTargetPath("/var/lib/kubelet/", "u1", "pv-a"),
    "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv-a/mount",
  );
  assert.equal(
    emptyDirPath("/var/lib/kubelet", "u1", "comm"),
    "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/comm",
  );
  assert.equal(escapeQualifiedName("a/b"), "a~b");
  assert.equal(uniqueVolumeName("d", "h"), "kubernetes.io/csi/d^h");
});

Deno.test("device dir uses sha256 of the handle; vol_data.json is Go's sorted compact encoding", () => {
  assert.equal(
    csiDeviceDir("/k", "d", "abc"),
    "/k/plugins/kubernetes.io/csi/d/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  const id = attachmentId("h", "d", "n");
  assert.match(id, /^csi-[0-9a-f]{64}$/);
  assert.equal(
    podVolData({ driverName: "d", volumeHandle: "h", nodeName: "n", specVolID: "pv" }),
    `{"attachmentID":"${id}","driverName":"d","nodeName":"n","specVolID":"pv","volumeHandle":"h","volumeLifecycleMode":"Persistent"}\n`,
  );
});
