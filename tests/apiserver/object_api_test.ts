/**
 * client-node's generic `KubernetesObjectApi` (what a deploy tool uses) against the emulator:
 * per-GV discovery, server-side apply of the project's CRD and of a custom resource, reads,
 * the SMP default on a CR (415) and delete.
 */
import assert from "node:assert/strict";
import * as k8s from "@kubernetes/client-node";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { s3paCrd } from "../../src/api/mountpoint_s3_pod_attachment.ts";

Deno.test({
  name: "KubernetesObjectApi applies the CRD and a custom resource server-side",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const api = await startApiServer({ port: 0 });
    try {
      const kc = new k8s.KubeConfig();
      kc.loadFromFile(api.kubeconfigPath);
      const client = k8s.KubernetesObjectApi.makeApiClient(kc);
      const crd = s3paCrd() as k8s.KubernetesObject;
      await client.patch(
        crd,
        undefined,
        undefined,
        "deploy-tool",
        true,
        k8s.PatchStrategy.ServerSideApply,
      );
      const ref = {
        apiVersion: "s3.csi.scality.com/v2",
        kind: "MountpointS3PodAttachment",
        metadata: { name: "s3pa-x" },
      };
      const cr: k8s.KubernetesObject & { spec: unknown } = {
        apiVersion: "s3.csi.scality.com/v2",
        kind: "MountpointS3PodAttachment",
        metadata: { name: "s3pa-x" },
        spec: {
          nodeName: "node-a",
          persistentVolumeName: "pv",
          volumeID: "vol",
          mountOptions: "",
          workloadFSGroup: "",
          authenticationSource: "driver",
          mountpointS3PodAttachments: {},
        },
      };
      const created = await client.patch(
        cr,
        undefined,
        undefined,
        "deploy-tool",
        true,
        k8s.PatchStrategy.ServerSideApply,
      );
      assert.equal(created.metadata?.generation, 1);
      const again = await client.patch(
        cr,
        undefined,
        undefined,
        "deploy-tool",
        true,
        k8s.PatchStrategy.ServerSideApply,
      );
      assert.equal(again.metadata?.resourceVersion, created.metadata?.resourceVersion);
      const read = await client.read(ref);
      assert.equal((read as unknown as { spec: { nodeName: string } }).spec.nodeName, "node-a");
      await assert.rejects(
        () => client.patch({ ...cr, spec: { nodeName: "node-b" } } as k8s.KubernetesObject),
        (e: unknown) => e instanceof k8s.ApiException && e.code === 415,
      );
      const status = await client.delete(ref);
      assert.equal((status as unknown as { status: string }).status, "Success");
    } finally {
      await api.stop();
    }
  },
});
