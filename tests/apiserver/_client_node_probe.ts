/**
 * Child process of `cli_test.ts`: uses client-node with `KUBECONFIG` (as the driver binaries do)
 * against the emulator over HTTPS: a list, then an informer that must see a new ConfigMap.
 * Prints `ok <namespaces> <informer add>` on success.
 *
 * @module
 */
import * as k8s from "@kubernetes/client-node";
import { writeStdout } from "../../src/util/stdio.ts";

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
const namespaces = await core.listNamespace();
const informer = k8s.makeInformer(
  kc,
  "/api/v1/namespaces/default/configmaps",
  () => core.listNamespacedConfigMap({ namespace: "default" }),
);
let added = "";
informer.on("add", (o: k8s.V1ConfigMap) => added = o.metadata?.name ?? "");
await informer.start();
await core.createNamespacedConfigMap({
  namespace: "default",
  body: { metadata: { name: "from-child" } },
});
for (let i = 0; i < 100 && !added; i++) await new Promise((r) => setTimeout(r, 20));
await informer.stop();
writeStdout(`ok ${namespaces.items.length} ${added}\n`);
