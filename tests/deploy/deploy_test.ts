/**
 * `deno task deploy` / `deno task undeploy` against the API emulator and the real kube-apiserver
 * tier: everything applies with server-side apply (the CRD schema included), a second run changes
 * nothing (same resourceVersion and generation for every object), undeploy removes what it owns
 * and refuses while attachments exist.
 *
 * @module
 */
import assert from "node:assert/strict";
import { S3PA_CRD_NAME } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import {
  deployCluster,
  deployClusterKinds,
  deployTest,
  runTask,
  snapshot,
} from "./_deploy_cluster.ts";

function log(text: string): void {
  // deno-lint-ignore no-console
  console.error(text);
}

for (const kind of deployClusterKinds()) {
  deployTest(kind, `deploy twice then undeploy (${kind})`, async () => {
    await using c = await deployCluster(kind);
    const set = c.set ? ["--set", c.set] : [];
    const first = await runTask("deploy", c.kubeconfig, [...set, "--no-wait"]);
    assert.deepEqual(first.code, 0, first.stderr);
    assert.match(first.stdout, /Deployed s3\.csi\.scality\.com .* in [\d.]+s: /);
    const before = await snapshot(c.client, c.objects);
    for (const [k, v] of Object.entries(before)) assert.ok(v !== "absent", `${k} was not applied`);
    const crd = await c.client.get<
      { status?: { conditions?: { type: string; status: string }[] } }
    >(
      {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        kind: "CustomResourceDefinition",
        namespaced: false,
      },
      S3PA_CRD_NAME,
    );
    assert.ok(
      crd?.status?.conditions?.some((x) => x.type === "Established" && x.status === "True"),
    );

    const second = await runTask("deploy", c.kubeconfig, [...set, "--no-wait"]);
    assert.deepEqual(second.code, 0, second.stderr);
    assert.match(second.stdout, new RegExp(`: ${c.objects.length} unchanged\\n`));
    assert.deepEqual(
      await snapshot(c.client, c.objects),
      before,
      "a second deploy changed objects",
    );
    log(
      `deploy (${kind}): first ${first.ms} ms, second ${second.ms} ms, ${c.objects.length} objects`,
    );

    const down = await runTask("undeploy", c.kubeconfig, [
      ...set,
      ...(kind === "real" ? ["--force"] : []),
    ]);
    assert.deepEqual(down.code, 0, down.stderr);
    const after = await snapshot(c.client, c.objects);
    for (const o of c.objects) {
      const key = `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;
      const kept = o.kind === "CustomResourceDefinition" ||
        (o.kind === "Namespace" && o.metadata.name.endsWith("mount-s3")) ||
        (o.kind === "Namespace" && o.metadata.name.endsWith("-mp"));
      if (kept) assert.ok(after[key] !== "absent", `${key} should be kept without --purge`);
      else assert.deepEqual(after[key], "absent", `${key} should be deleted`);
    }
    log(`undeploy (${kind}): ${down.ms} ms`);
  });
}

Deno.test("deploy: rollout wait ends at its timeout on a cluster without controllers (emulator)", async () => {
  await using c = await deployCluster("emulator");
  const r = await runTask("deploy", c.kubeconfig, ["--wait-timeout", "2s"]);
  assert.deepEqual(r.code, 3, r.stderr);
  assert.match(r.stderr, /rollout not complete after 2s/);
  assert.match(r.stdout, /waiting Deployment kube-system\/s3-csi-controller/);
  assert.match(r.stdout, /waiting DaemonSet kube-system\/s3-csi-node/);
});

Deno.test("deploy: --dry-run writes nothing (emulator)", async () => {
  await using c = await deployCluster("emulator");
  const r = await runTask("deploy", c.kubeconfig, ["--dry-run"]);
  assert.deepEqual(r.code, 0, r.stderr);
  assert.match(r.stdout, /would create\s+DaemonSet kube-system\/s3-csi-node/);
  for (const v of Object.values(await snapshot(c.client, c.objects))) assert.deepEqual(v, "absent");
});

Deno.test("deploy: invalid values fail before anything is applied (emulator)", async () => {
  await using c = await deployCluster("emulator");
  const r = await runTask("deploy", c.kubeconfig, [
    "--set",
    "image.node=ghcr.io/Scality/Node:1,node.resources.requests.cpu=-5m,nodee.x=1",
  ]);
  assert.deepEqual(r.code, 2);
  assert.match(r.stderr, /image\.node: .*is not an image reference/);
  assert.match(r.stderr, /node\.resources\.requests\.cpu: must be a quantity ≥ 0/);
  assert.match(r.stderr, /nodee: unknown key/);
  assert.match(r.stderr, /Nothing was applied/);
  for (const v of Object.values(await snapshot(c.client, c.objects))) assert.deepEqual(v, "absent");
});

Deno.test("undeploy refuses while attachments exist, unless forced; --purge removes the CRD (emulator)", async () => {
  await using c = await deployCluster("emulator");
  assert.deepEqual((await runTask("deploy", c.kubeconfig, ["--no-wait"])).code, 0);
  await c.client.create(S3PAS, {
    metadata: { name: "node-a-vol-1" },
    spec: {
      nodeName: "node-a",
      persistentVolumeName: "pv-1",
      volumeID: "vol-1",
      mountOptions: "",
      workloadFSGroup: "",
      authenticationSource: "driver",
      mountpointS3PodAttachments: {},
    },
  });
  const refused = await runTask("undeploy", c.kubeconfig, []);
  assert.deepEqual(refused.code, 4, refused.stderr);
  assert.match(refused.stderr, /1 MountpointS3PodAttachment\(s\) exist.*node-a-vol-1.*--force/);
  const still = await snapshot(c.client, c.objects);
  for (const v of Object.values(still)) {
    assert.ok(v !== "absent", "refused undeploy deleted something");
  }

  const purged = await runTask("undeploy", c.kubeconfig, ["--force", "--purge"]);
  assert.deepEqual(purged.code, 0, purged.stderr);
  for (const [k, v] of Object.entries(await snapshot(c.client, c.objects))) {
    assert.deepEqual(v, "absent", `${k} should be purged`);
  }
});
