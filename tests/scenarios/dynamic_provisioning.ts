/**
 * Dynamic provisioning through a csi-provisioner and the controller's Controller service: mode
 * `bucket` (a bucket per volume, deleted with `delete-all`) and mode `prefix` (a key prefix per
 * volume inside one shared bucket; a pod sees only its own prefix).
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import { PVCS, PVS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../src/kube/types.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, type ScenarioCluster, unique } from "./cluster.ts";

/** A StorageClass of the driver (Immediate binding, Delete); returns its name. */
export async function storageClass(
  e: ScenarioCluster,
  parameters: Record<string, string>,
  mountOptions = ["allow-delete", "allow-overwrite"],
): Promise<string> {
  const name = `sc-${unique()}`;
  await e.client.create(STORAGE_CLASSES, {
    metadata: { name },
    provisioner: DRIVER_NAME,
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
    mountOptions,
    parameters,
  } as KubeObject);
  return name;
}

/** A claim of class `sc`, waited until Bound, with the PV the provisioner made. */
export async function claim(
  e: ScenarioCluster,
  sc: string,
): Promise<{ name: string; pv: PersistentVolume }> {
  const name = `pvc-${unique()}`;
  const created = await e.client.create<PersistentVolumeClaim>(PVCS, {
    metadata: { name, namespace: e.ns },
    spec: {
      storageClassName: sc,
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: "1Gi" } },
    },
  });
  await e.waitBound(name, 60_000);
  const pv = (await e.client.get<PersistentVolume>(PVS, `pvc-${created.metadata.uid}`))!;
  assert.ok(pv, "PV created by the provisioner");
  return { name, pv };
}

/** Delete a claim and wait until its PV is gone (DeleteVolume ran). */
export async function dropClaim(
  e: ScenarioCluster,
  c: { name: string; pv: PersistentVolume },
): Promise<void> {
  await e.client.delete(PVCS, c.name, e.ns).catch(() => false);
  await waitFor(
    `PV ${c.pv.metadata.name} deleted`,
    async () => !(await e.client.get(PVS, c.pv.metadata.name!)),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** The scenario. */
export const DYNAMIC_PROVISIONING: Scenario = {
  name: "dynamic provisioning",
  nodes: 1,
  async run(e, step) {
    await step(
      "mode bucket: a new bucket per volume, written by a pod, deleted with the PVC",
      async () => {
        const sc = await storageClass(e, { deletePolicy: "delete-all" });
        const c = await claim(e, sc);
        const bucket = c.pv.spec.csi!.volumeAttributes!.bucketName!;
        assert.match(bucket, /^pvc-[0-9a-f-]+$/);
        const c2 = await claim(e, sc);
        const bucket2 = c2.pv.spec.csi!.volumeAttributes!.bucketName!;
        assert.notEqual(bucket, bucket2, "one bucket per volume");
        await e.run({
          name: `dyn-${unique()}`,
          volumes: [{ claim: c.name, mountPath: "/data" }],
          script: "set -e; echo dynamic > /data/f.txt; mkdir /data/d; echo deep > /data/d/g.txt",
        });
        assert.equal(await e.get(bucket, "f.txt"), "dynamic\n");
        assert.equal(await e.get(bucket, "d/g.txt"), "deep\n");
        assert.deepEqual(await e.keys(bucket2), [], "the other volume's bucket is untouched");
        await dropClaim(e, c);
        await dropClaim(e, c2);
        await assert.rejects(e.keys(bucket), "delete-all removed the bucket and its data");
        await assert.rejects(e.keys(bucket2), "the empty bucket is gone too");
        await e.client.delete(STORAGE_CLASSES, sc);
      },
    );

    await step(
      "mode prefix: a prefix per volume in one bucket; a pod sees only its prefix",
      async () => {
        const shared = await e.bucket("shared");
        await e.put(shared, "neighbour/secret.txt", "not yours");
        const sc = await storageClass(e, {
          mode: "prefix",
          bucketName: shared,
          basePrefix: "vols/",
          deletePolicy: "delete-all",
        });
        const a = await claim(e, sc);
        const b = await claim(e, sc);
        const prefixA = a.pv.spec.csi!.volumeAttributes!.prefix!;
        const prefixB = b.pv.spec.csi!.volumeAttributes!.prefix!;
        assert.equal(a.pv.spec.csi!.volumeAttributes!.bucketName, shared);
        assert.match(prefixA, /^vols\/pvc-[0-9a-f-]+\/$/);
        assert.notEqual(prefixA, prefixB);
        await e.run({
          name: `pa-${unique()}`,
          volumes: [{ claim: a.name, mountPath: "/data" }],
          script: "set -e; echo from-a > /data/a.txt",
        });
        const out = await e.run({
          name: `pb-${unique()}`,
          volumes: [{ claim: b.name, mountPath: "/data" }],
          script: "set -e; echo from-b > /data/b.txt; echo LIST; ls -A /data; echo END",
        });
        const listing = /LIST\n([\s\S]*)END/.exec(out)?.[1] ?? "";
        assert.equal(listing.trim(), "b.txt", `pod B sees only its prefix: ${JSON.stringify(out)}`);
        assert.equal(await e.get(shared, `${prefixA}a.txt`), "from-a\n");
        assert.equal(await e.get(shared, `${prefixB}b.txt`), "from-b\n");
        await dropClaim(e, a);
        await dropClaim(e, b);
        assert.deepEqual(
          await e.keys(shared),
          ["neighbour/secret.txt"],
          "delete-all removed both prefixes, nothing else",
        );
        await e.client.delete(STORAGE_CLASSES, sc);
        await e.dropBucket(shared);
      },
    );
  },
};
