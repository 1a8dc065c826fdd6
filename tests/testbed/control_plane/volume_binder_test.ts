import assert from "node:assert/strict";
import { FakeKubeClient } from "../../../src/kube/fake_client.ts";
import { PVCS, PVS } from "../../../src/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../kubelet/k8s_types.ts";
import {
  ANN_BIND_COMPLETED,
  ANN_BOUND_BY_CONTROLLER,
  findBestMatch,
  pvMatchesClaim,
  VolumeBinder,
} from "./volume_binder.ts";

function pv(name: string, size: string, extra: Partial<PersistentVolume["spec"]> = {}) {
  return {
    metadata: { name },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteMany"],
      storageClassName: "",
      csi: { driver: "d", volumeHandle: name },
      ...extra,
    },
  } as PersistentVolume;
}

function pvc(name: string, extra: Partial<PersistentVolumeClaim["spec"]> = {}) {
  return {
    metadata: { name, namespace: "ns" },
    spec: {
      accessModes: ["ReadWriteMany"],
      storageClassName: "",
      resources: { requests: { storage: "1Gi" } },
      ...extra,
    },
  } as PersistentVolumeClaim;
}

Deno.test("capacities compare as quantities: 1Gi fits 1Gi and 2G, not 1G or garbage", () => {
  const claim = pvc("c"); // requests 1Gi
  assert.ok(pvMatchesClaim(pv("a", "1Gi"), claim));
  assert.ok(pvMatchesClaim(pv("b", "2G"), claim));
  assert.ok(!pvMatchesClaim(pv("c", "1G"), claim));
  assert.ok(!pvMatchesClaim(pv("d", "x"), claim));
});

Deno.test("a PVC naming a static PV is bound both ways, like kube-controller-manager", async () => {
  const c = new FakeKubeClient();
  await c.create(PVS, pv("pv-a", "10Gi"));
  const claim = await c.create(PVCS, pvc("claim", { volumeName: "pv-a" }));
  const binder = new VolumeBinder({ client: c });
  await binder.syncAll();
  const [v] = c.objects<PersistentVolume>(PVS);
  const [p] = c.objects<PersistentVolumeClaim>(PVCS);
  assert.deepEqual(
    { ...v!.spec.claimRef, resourceVersion: undefined },
    {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      namespace: "ns",
      name: "claim",
      uid: claim.metadata.uid,
      resourceVersion: undefined,
    },
  );
  assert.equal(v!.status?.phase, "Bound");
  assert.equal(v!.metadata.annotations?.[ANN_BOUND_BY_CONTROLLER], "yes");
  assert.equal(p!.spec.volumeName, "pv-a");
  assert.equal(p!.metadata.annotations?.[ANN_BIND_COMPLETED], "yes");
  assert.equal(
    p!.metadata.annotations?.[ANN_BOUND_BY_CONTROLLER],
    undefined,
    "the user chose the volume",
  );
  assert.deepEqual(p!.status, {
    phase: "Bound",
    accessModes: ["ReadWriteMany"],
    capacity: { storage: "10Gi" },
  });
});

Deno.test("an unnamed PVC gets the smallest matching Available PV; release follows Retain", async () => {
  const c = new FakeKubeClient();
  await c.create(PVS, pv("big", "100Gi"));
  await c.create(PVS, pv("small", "2Gi"));
  await c.create(PVS, pv("tiny", "100Mi"));
  await c.create(PVS, pv("rox", "1Gi", { accessModes: ["ReadOnlyMany"] }));
  await c.create(PVS, pv("classy", "1Gi", { storageClassName: "fast" }));
  await c.create(PVCS, pvc("claim"));
  const binder = new VolumeBinder({ client: c });
  await binder.syncAll(); // PVs become Available
  await binder.syncAll(); // the claim binds
  const phases = Object.fromEntries(
    c.objects<PersistentVolume>(PVS).map((v) => [v.metadata.name, v.status?.phase]),
  );
  assert.deepEqual(phases, {
    big: "Available",
    small: "Bound",
    tiny: "Available",
    rox: "Available",
    classy: "Available",
  });
  const [claim] = c.objects<PersistentVolumeClaim>(PVCS);
  assert.equal(claim!.metadata.annotations?.[ANN_BOUND_BY_CONTROLLER], "yes");
  await c.delete(PVCS, "claim", "ns");
  await binder.syncAll();
  const small = c.objects<PersistentVolume>(PVS).find((v) => v.metadata.name === "small")!;
  assert.equal(small.status?.phase, "Released");
  assert.equal(small.spec.claimRef?.name, "claim", "claimRef stays (Retain)");
});

Deno.test("findBestMatch ignores PVs bound to other claims and honours pre-binding", () => {
  const a = pv("a", "1Gi");
  a.status = { phase: "Available" };
  const b = pv("b", "1Gi", { claimRef: { namespace: "ns", name: "other", uid: "x" } });
  const pre = pv("pre", "5Gi", { claimRef: { namespace: "ns", name: "claim" } });
  assert.equal(findBestMatch([b, pre], pvc("claim"))?.metadata.name, "pre");
  assert.equal(findBestMatch([a, b], pvc("claim"))?.metadata.name, "a");
  assert.equal(findBestMatch([b], pvc("claim")), undefined);
});
