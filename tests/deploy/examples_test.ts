/**
 * The examples in `k8s/examples/` use only what the driver understands: our driver name, volume
 * attributes the node plugin reads, StorageClass parameters the Controller service accepts, access
 * modes a bucket can be published with, and the Secret keys the deployment maps to credentials.
 * Against the API emulator they are accepted as they are (`kubectl apply` would send the same).
 *
 * @module
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { VOLUME_CONTEXT } from "../../src/csi/volume_context.ts";
import { PARAM } from "../../src/provisioning/parameters.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import { ROOT } from "../_helpers.ts";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import {
  PODS,
  PVCS,
  PVS,
  type Resource,
  SECRETS,
  STORAGE_CLASSES,
} from "../../src/kube/resources.ts";

type Doc = Record<string, unknown> & { kind: string; metadata: { name: string } };

function load(file: string): Doc[] {
  return parseAllDocuments(Deno.readTextFileSync(`${ROOT}k8s/examples/${file}`)).map((d) =>
    d.toJS() as Doc
  );
}

Deno.test("examples: static PV uses our driver, known attributes and a publishable access mode", () => {
  const docs = load("static-provisioning.yaml");
  const pv = docs.find((d) => d.kind === "PersistentVolume")!;
  const spec = pv.spec as {
    accessModes: string[];
    csi: { driver: string; volumeAttributes: Record<string, string> };
  };
  assert.equal(spec.csi.driver, DRIVER_NAME);
  const known = new Set<string>(Object.values(VOLUME_CONTEXT));
  for (const k of Object.keys(spec.csi.volumeAttributes)) assert.ok(known.has(k), k);
  assert.ok(["ReadWriteMany", "ReadOnlyMany"].includes(spec.accessModes[0]!));
  assert.deepEqual(docs.map((d) => d.kind), ["PersistentVolume", "PersistentVolumeClaim", "Pod"]);
});

Deno.test("examples: StorageClass parameters are ones the Controller service accepts", () => {
  const sc = load("dynamic-provisioning.yaml").find((d) => d.kind === "StorageClass")!;
  assert.equal(sc.provisioner, DRIVER_NAME);
  const known = new Set<string>(Object.values(PARAM));
  for (const k of Object.keys(sc.parameters as Record<string, string>)) assert.ok(known.has(k), k);
});

Deno.test("examples: the credential Secret matches the deployment's default key names", () => {
  const [secret] = load("credentials-secret.yaml");
  const s = defaultValues().s3CredentialSecret;
  assert.equal(secret!.metadata.name, s.name);
  assert.deepEqual(
    Object.keys(secret!.stringData as Record<string, string>).sort(),
    [s.accessKeyId, s.secretAccessKey].sort(),
  );
});

Deno.test("examples: the API emulator accepts every example object", async () => {
  const server = await startApiServer({ podTerminationMs: 0 });
  const client = new RestKubeClient(kubeConfigFromFile(server.kubeconfigPath));
  try {
    const kinds: Record<string, Resource> = {
      PersistentVolume: PVS,
      PersistentVolumeClaim: PVCS,
      Pod: PODS,
      StorageClass: STORAGE_CLASSES,
      Secret: SECRETS,
    };
    for (
      const file of [
        "credentials-secret.yaml",
        "static-provisioning.yaml",
        "dynamic-provisioning.yaml",
      ]
    ) {
      for (const doc of load(file)) {
        const r = kinds[doc.kind];
        assert.ok(r, `${file}: unexpected kind ${doc.kind}`);
        const ns = (doc.metadata as { namespace?: string }).namespace;
        await client.patch(r, doc.metadata.name, ns, doc, {
          type: "apply",
          fieldManager: "examples-test",
        });
      }
    }
  } finally {
    await client.close();
    await server.stop();
    await Deno.remove(server.kubeconfigPath).catch(() => {});
  }
});
