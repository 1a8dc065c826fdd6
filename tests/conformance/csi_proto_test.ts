/**
 * The tier's own reading of the CSI proto (`_csi_proto.ts`) and the byte-level path rewrite of
 * `_kubelet_paths.ts`, checked against each other: the field numbers the rewrite edits are the
 * proto's target/volume path fields, and a rewritten request decodes to the same request with only
 * the path changed.
 */
import assert from "node:assert/strict";
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import { CSI_SERVICE_NAMES, decodeRequest, encodeRequest, unaryMethods } from "./_csi_proto.ts";
import { readStringField, toKubeletRequest } from "./_kubelet_paths.ts";

const ROOT = "/var/lib/kubelet";
const SANITY_TARGET = `${ROOT}/pods/uid-1/volumes/kubernetes.io~csi/pv-1/target`;
const KUBELET_TARGET = `${ROOT}/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount`;

Deno.test("the proxy relays every unary RPC of the proto's three services", () => {
  assert.deepEqual(CSI_SERVICE_NAMES, ["Identity", "Controller", "Node"]);
  assert.deepEqual(unaryMethods("Identity"), ["GetPluginInfo", "GetPluginCapabilities", "Probe"]);
  const node = unaryMethods("Node");
  for (const m of ["NodePublishVolume", "NodeUnpublishVolume", "NodeGetVolumeStats"]) {
    assert.ok(node.includes(m), m);
  }
  assert.ok(unaryMethods("Controller").includes("CreateVolume"));
});

Deno.test("decodeRequest() reads a NodePublishVolume request the kubelet path rewrite changed", () => {
  const request = {
    volumeId: "vol-1",
    targetPath: SANITY_TARGET,
    volumeCapability: {
      mount: { mountFlags: ["allow-delete"] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
    readonly: true,
    secrets: { access_key_id: "a" },
    volumeContext: { bucketName: "b" },
  };
  const bytes = encodeRequest("Node", "NodePublishVolume", request);
  assert.equal(readStringField(bytes, 4), SANITY_TARGET); // target_path = 4 in the proto
  const rewritten = toKubeletRequest(ROOT, "NodePublishVolume", bytes);
  const req = decodeRequest<NodePublishVolumeRequest>("Node", "NodePublishVolume", rewritten);
  assert.equal(req.targetPath, KUBELET_TARGET);
  assert.equal(req.volumeId, "vol-1");
  assert.equal(req.readonly, true);
  assert.equal(req.volumeCapability?.accessType, "mount");
  assert.deepEqual(req.volumeCapability?.mount?.mountFlags, ["allow-delete"]);
  assert.equal(req.volumeCapability?.accessMode?.mode, "MULTI_NODE_MULTI_WRITER");
  assert.deepEqual(req.secrets, { access_key_id: "a" });
  assert.deepEqual(req.volumeContext, { bucketName: "b" });
});

Deno.test("the rewrite edits the path fields of NodeUnpublishVolume and NodeGetVolumeStats", () => {
  const unpublish = toKubeletRequest(
    ROOT,
    "NodeUnpublishVolume",
    encodeRequest("Node", "NodeUnpublishVolume", { volumeId: "v", targetPath: SANITY_TARGET }),
  );
  assert.equal(
    decodeRequest<{ targetPath: string }>("Node", "NodeUnpublishVolume", unpublish).targetPath,
    KUBELET_TARGET,
  );
  const stats = toKubeletRequest(
    ROOT,
    "NodeGetVolumeStats",
    encodeRequest("Node", "NodeGetVolumeStats", { volumeId: "v", volumePath: SANITY_TARGET }),
  );
  assert.equal(
    decodeRequest<{ volumePath: string }>("Node", "NodeGetVolumeStats", stats).volumePath,
    KUBELET_TARGET,
  );
});

Deno.test("decodeRequest() names an unknown method", () => {
  assert.throws(
    () => decodeRequest("Node", "NodeFrobnicate", new Uint8Array()),
    /csi\.v1\.Node has no method NodeFrobnicate/,
  );
});
