/**
 * The csi-provisioner emulation (`tests/testbed/csi_provisioner/`) against the API emulator, the Controller
 * service on a unix socket and RGW, with the sandbox's PV controller (`VolumeBinder`) binding and
 * releasing: PVC → CreateVolume → PV → Bound; PVC deleted → Released → DeleteVolume per policy.
 */
import assert from "node:assert/strict";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { ApiEventRecorder } from "../../src/kube/event_recorder.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import {
  EVENTS,
  NAMESPACES,
  PVCS,
  PVS,
  SECRETS,
  STORAGE_CLASSES,
} from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../src/kube/types.ts";
import { VolumeBinder } from "../testbed/control_plane/volume_binder.ts";
import { Provisioner } from "../testbed/csi_provisioner/provisioner.ts";
import { ANN } from "../testbed/csi_provisioner/provision_request.ts";
import { testOrSkip, waitFor } from "../_helpers.ts";
import { RawS3, rgw, SKIP_REASON, startController, unique } from "./_rgw.ts";

const S3 = rgw();
const S3_SKIP = S3 ? undefined : SKIP_REASON;

async function world() {
  const api = await startApiServer({ podTerminationMs: 0 });
  const client = new RestKubeClient(kubeConfigFromFile(api.kubeconfigPath));
  const ns = `prov-${unique()}`;
  await client.create(NAMESPACES, { metadata: { name: ns } });
  const ctl = await startController(S3!);
  const binder = new VolumeBinder({ client, resyncMs: 300 });
  await binder.start();
  const provisioner = new Provisioner({
    client,
    socketPath: ctl.socket,
    events: new ApiEventRecorder(client, "csi-provisioner", "test"),
    retryStartMs: 200,
    retryMaxMs: 1000,
    extraCreateMetadata: true,
  });
  await provisioner.start();
  const raw = new RawS3(S3!);
  return {
    client,
    ns,
    raw,
    async [Symbol.asyncDispose]() {
      await provisioner.stop();
      await binder.stop();
      await ctl[Symbol.asyncDispose]();
      await raw.close();
      await api.stop();
      await Deno.remove(api.kubeconfigPath).catch(() => {});
    },
  };
}

function storageClass(name: string, reclaimPolicy: string, parameters: Record<string, string>) {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner: "s3.csi.scality.com",
    reclaimPolicy,
    volumeBindingMode: "Immediate",
    mountOptions: ["allow-delete"],
    parameters,
  };
}

function claim(ns: string, name: string, sc: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: ns },
    spec: {
      storageClassName: sc,
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: "2Gi" } },
    },
  };
}

testOrSkip(S3_SKIP, {
  name: "provisioner: PVC → bucket + bound PV; deleting the PVC applies delete-all",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world();
    const sc = `all-${unique()}`;
    await w.client.create(
      STORAGE_CLASSES,
      storageClass(sc, "Delete", { deletePolicy: "delete-all" }) as never,
    );
    const pvc = await w.client.create(PVCS, claim(w.ns, "data", sc));
    const bound = await waitFor("the PVC to be bound", async () => {
      const c = await w.client.get<PersistentVolumeClaim>(PVCS, "data", w.ns);
      return c?.status?.phase === "Bound" ? c : undefined;
    }, { timeoutMs: 30_000, intervalMs: 100 });
    const pvName = `pvc-${pvc.metadata.uid}`;
    assert.equal(bound.spec.volumeName, pvName);
    const pv = (await w.client.get<PersistentVolume>(PVS, pvName))!;
    const bucket = pv.spec.csi!.volumeAttributes!.bucketName!;
    assert.equal(bucket, pvName);
    assert.equal(pv.spec.csi!.driver, "s3.csi.scality.com");
    assert.equal(pv.spec.capacity?.storage, "2Gi");
    assert.deepEqual(pv.spec.mountOptions, ["allow-delete"]);
    assert.equal(pv.spec.persistentVolumeReclaimPolicy, "Delete");
    assert.equal(pv.metadata.annotations?.[ANN.provisionedBy], "s3.csi.scality.com");
    assert.ok(await w.raw.exists(bucket));
    assert.equal((await w.raw.tags(bucket))["s3.csi.scality.com/pvc-namespace"], w.ns);
    await w.raw.put(bucket, "written-by-app.txt");

    await w.client.delete(PVCS, "data", w.ns);
    await waitFor("the PV to be deleted", async () => !(await w.client.get(PVS, pvName)), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    assert.ok(!(await w.raw.exists(bucket)), "delete-all removed the bucket and its data");
  },
});

testOrSkip(S3_SKIP, {
  name:
    "provisioner: templated provisioner secret; delete-if-empty keeps a non-empty bucket and says why",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world();
    const sc = `ifempty-${unique()}`;
    await w.client.create(SECRETS, {
      metadata: { name: `${w.ns}-s3`, namespace: w.ns },
      // `data` (base64): the API emulator does not fold stringData into data.
      data: {
        "access_key_id": btoa(S3!.other.accessKeyId),
        "secret_access_key": btoa(S3!.other.secretAccessKey),
      },
    } as never);
    await w.client.create(
      STORAGE_CLASSES,
      storageClass(sc, "Delete", {
        "csi.storage.k8s.io/provisioner-secret-name": "${pvc.namespace}-s3",
        "csi.storage.k8s.io/provisioner-secret-namespace": "${pvc.namespace}",
        bucketNamePrefix: "t-",
      }) as never,
    );
    const pvc = await w.client.create(PVCS, claim(w.ns, "tenant", sc));
    const pvName = `pvc-${pvc.metadata.uid}`;
    const pv = await waitFor("the PV", () => w.client.get<PersistentVolume>(PVS, pvName), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    const bucket = `t-${pvName}`;
    assert.equal(pv.spec.csi!.volumeAttributes!.bucketName, bucket);
    assert.equal(pv.spec.csi!.volumeAttributes!.authenticationSource, "secret");
    assert.equal(pv.metadata.annotations?.[ANN.deletionSecretName], `${w.ns}-s3`);
    assert.ok(await w.raw.exists(bucket, "other"), "made with the secret's account");
    await w.raw.put(bucket, "keep.txt", "x", "other");

    await w.client.delete(PVCS, "tenant", w.ns);
    const event = await waitFor("a VolumeFailedDelete event", async () => {
      const events = await w.client.list<{ reason?: string; message?: string }>(EVENTS, {
        namespace: "default",
      });
      return events.items.find((e) => e.reason === "VolumeFailedDelete");
    }, { timeoutMs: 30_000, intervalMs: 200 });
    assert.match(event.message!, /code = 9 .*not empty \(keep\.txt\).*delete-if-empty/);
    const released = await w.client.get<PersistentVolume>(PVS, pvName);
    assert.equal(released?.status?.phase, "Released", "the PV stays, showing why");
    assert.ok(await w.raw.exists(bucket, "other"));

    const c = await w.raw.client("other");
    const { DeleteObjectCommand } = await import("@aws-sdk/client-s3");
    await c.send(new DeleteObjectCommand({ Bucket: bucket, Key: "keep.txt" }));
    await waitFor("the PV to be deleted", async () => !(await w.client.get(PVS, pvName)), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    assert.ok(!(await w.raw.exists(bucket, "other")));
  },
});

testOrSkip(S3_SKIP, {
  name: "provisioner: reclaimPolicy Retain keeps PV and bucket; prefix mode shares one bucket",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world();
    const shared = `shared-${unique()}`;
    await w.raw.createBucket(shared);
    try {
      const sc = `prefix-${unique()}`;
      await w.client.create(
        STORAGE_CLASSES,
        storageClass(sc, "Retain", { mode: "prefix", bucketName: shared }) as never,
      );
      const a = await w.client.create(PVCS, claim(w.ns, "a", sc));
      const b = await w.client.create(PVCS, claim(w.ns, "b", sc));
      for (const p of [a, b]) {
        await waitFor("bound", async () => {
          const c = await w.client.get<PersistentVolumeClaim>(PVCS, p.metadata.name!, w.ns);
          return c?.status?.phase === "Bound";
        }, { timeoutMs: 30_000, intervalMs: 100 });
      }
      const pvA = (await w.client.get<PersistentVolume>(PVS, `pvc-${a.metadata.uid}`))!;
      assert.equal(pvA.spec.csi!.volumeAttributes!.prefix, `pvc-${a.metadata.uid}/`);
      assert.deepEqual(
        await w.raw.keys(shared),
        [
          `pvc-${a.metadata.uid}/`,
          `pvc-${b.metadata.uid}/`,
        ].sort(),
      );
      await w.client.delete(PVCS, "a", w.ns);
      await waitFor("Released", async () => {
        const pv = await w.client.get<PersistentVolume>(PVS, `pvc-${a.metadata.uid}`);
        return pv?.status?.phase === "Released";
      }, { timeoutMs: 30_000, intervalMs: 100 });
      await new Promise((r) => setTimeout(r, 1000));
      assert.ok(await w.client.get(PVS, `pvc-${a.metadata.uid}`), "Retain keeps the PV");
      assert.equal((await w.raw.keys(shared)).length, 2, "and the data");
    } finally {
      await w.raw.remove(shared);
    }
  },
});

testOrSkip(S3_SKIP, {
  name: "provisioner: WaitForFirstConsumer waits for selected-node; unknown reserved keys fail",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await using w = await world();
    const sc = `wffc-${unique()}`;
    await w.client.create(STORAGE_CLASSES, {
      ...storageClass(sc, "Delete", { deletePolicy: "delete-all" }),
      volumeBindingMode: "WaitForFirstConsumer",
    } as never);
    const pvc = await w.client.create(PVCS, claim(w.ns, "late", sc));
    const pvName = `pvc-${pvc.metadata.uid}`;
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(await w.client.get(PVS, pvName), undefined, "no PV before a node is selected");
    await w.client.patch(PVCS, "late", w.ns, {
      metadata: { annotations: { [ANN.selectedNode]: "node-1" } },
    });
    await waitFor("the PV", () => w.client.get<PersistentVolume>(PVS, pvName), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    assert.ok(await w.raw.exists(pvName));

    const bad = `bad-${unique()}`;
    await w.client.create(
      STORAGE_CLASSES,
      storageClass(bad, "Delete", { "csi.storage.k8s.io/unknown-key": "x" }) as never,
    );
    await w.client.create(PVCS, claim(w.ns, "bad", bad));
    const event = await waitFor(
      "ProvisioningFailed",
      async () =>
        (await w.client.list<{ reason?: string; message?: string }>(EVENTS, { namespace: w.ns }))
          .items.find((e) => e.reason === "ProvisioningFailed"),
      {
        timeoutMs: 30_000,
        intervalMs: 100,
      },
    );
    assert.match(event.message!, /unknown parameter key "csi.storage.k8s.io\/unknown-key"/);

    await w.client.delete(PVCS, "late", w.ns);
    await waitFor("the PV to be deleted", async () => !(await w.client.get(PVS, pvName)), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    assert.ok(!(await w.raw.exists(pvName)));
  },
});
