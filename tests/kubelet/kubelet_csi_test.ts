/**
 * The kubelet emulator against a recording CSI node server over a real unix socket: the exact
 * NodePublishVolume request kubelet v1.32 sends, the directories and `vol_data.json` it leaves,
 * the workload run as its user with the volume reachable, and the deletion order.
 */
import assert from "node:assert/strict";
import { EVENTS, PODS, SECRETS } from "../../src/kube/resources.ts";
import { PVCS, PVS } from "../../src/kube/resources.ts";
import { csiTargetPath, csiVolumeDir, podDir } from "../testbed/kubelet/kubelet_paths.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { Code, CsiError } from "../../src/csi/errors.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import { exists, testOrSkip, waitFor } from "../_helpers.ts";
import { csiPv, pvc, startHarness } from "../testbed/harness/kubelet_harness.ts";

const ROOT_SKIP = Deno.uid() === 0 ? undefined : "needs root (mounts, pods under other uids)";

function workload(
  name: string,
  command: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    metadata: { name, namespace: "default" },
    spec: {
      nodeName: "node-1",
      restartPolicy: "Never",
      serviceAccountName: "app-sa",
      terminationGracePeriodSeconds: 5,
      securityContext: { runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000 },
      containers: [{
        name: "app",
        image: "busybox",
        command: ["sh", "-c", command],
        volumeMounts: [{ name: "data", mountPath: "/data" }],
      }],
      volumes: [
        { name: "data", persistentVolumeClaim: { claimName: "claim-a", readOnly: true } },
        { name: "unused", persistentVolumeClaim: { claimName: "claim-unused" } },
      ],
      ...extra,
    },
  };
}

testOrSkip(ROOT_SKIP, {
  name:
    "kubelet emulator publishes with kubelet's exact request, runs the workload as its user, unpublishes and deletes",
  async fn() {
    await using h = await startHarness();
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    await h.client.create(SECRETS, {
      metadata: { name: "s3-creds", namespace: "default" },
      data: { key_id: btoa("AKID"), secret_access_key: btoa("s3cr3t") },
    });
    await h.client.create(
      PVS,
      csiPv("pv-a", {
        csi: {
          driver: DRIVER_NAME,
          volumeHandle: "vol-a",
          volumeAttributes: {
            bucketName: "bucket-a",
            "csi.storage.k8s.io/pod.name": "overwritten",
          },
          nodePublishSecretRef: { name: "s3-creds", namespace: "default" },
        },
      }),
    );
    await h.client.create(PVCS, pvc("claim-a", "pv-a"));
    const created = await h.client.create<Pod>(
      PODS,
      workload(
        "app-1",
        "echo hello > /data/out.txt && cat /data/out.txt && id -u && id -G && pwd",
      ) as Pod,
    );
    const uid = created.metadata.uid;
    const done = await waitFor("pod Succeeded", async () => {
      const p = await h.client.get<Pod>(PODS, "app-1", "default");
      return p?.status?.phase === "Succeeded" ? p : undefined;
    }, { timeoutMs: 20_000 });

    // RPC sequence: registration NodeGetInfo; MountDevice 1× caps; SetUp 3× caps; publish.
    const sequence = h.csi.calls.map((c) => c.method);
    const firstPublish = sequence.indexOf("NodePublishVolume");
    assert.deepEqual(sequence.slice(0, firstPublish + 1), [
      "NodeGetInfo",
      "NodeGetCapabilities",
      "NodeGetCapabilities",
      "NodeGetCapabilities",
      "NodeGetCapabilities",
      "NodePublishVolume",
    ]);
    const target = csiTargetPath(h.root, uid, "pv-a");
    assert.equal(target, `${h.root}/pods/${uid}/volumes/kubernetes.io~csi/pv-a/mount`);
    const publishes = h.csi.of("NodePublishVolume");
    assert.equal(publishes.length, 1, "the unused PVC volume is never published");
    assert.deepEqual(publishes[0]!.request, {
      volumeId: "vol-a",
      publishContext: {},
      stagingTargetPath: "",
      targetPath: target,
      volumeCapability: {
        mount: {
          fsType: "",
          mountFlags: ["allow-delete", "region us-east-1"],
          volumeMountGroup: "2000",
        },
        accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
        accessType: "mount",
      },
      readonly: true,
      secrets: { key_id: "AKID", secret_access_key: "s3cr3t" },
      volumeContext: {
        bucketName: "bucket-a",
        "csi.storage.k8s.io/pod.name": "app-1",
        "csi.storage.k8s.io/pod.namespace": "default",
        "csi.storage.k8s.io/pod.uid": uid,
        "csi.storage.k8s.io/serviceAccount.name": "app-sa",
        "csi.storage.k8s.io/ephemeral": "false",
      },
    });

    // The container ran as 1000:3000 with fsGroup 2000 and found the volume at the target path.
    const status = done.status!.containerStatuses![0]!;
    assert.equal(status.state.terminated?.exitCode, 0);
    assert.equal(status.state.terminated?.reason, "Completed");
    const log = await Deno.readTextFile(h.kubelet.containerLogPath(uid, "app")!);
    assert.equal(log, "hello\n1000\n3000 2000\n/\n");
    const file = await Deno.stat(`${target}/out.txt`).catch(() => undefined);
    // The recording driver's unpublish removes the target, so the file may already be gone.
    if (file) assert.equal(file.uid, 1000);

    // A terminal pod's volumes are unpublished: volume_id + target only.
    await waitFor("NodeUnpublishVolume", () => h.csi.of("NodeUnpublishVolume").length === 1);
    assert.deepEqual(h.csi.of("NodeUnpublishVolume")[0]!.request, {
      volumeId: "vol-a",
      targetPath: target,
    });
    await waitFor("PV dir removed", async () => !(await exists(csiVolumeDir(h.root, uid, "pv-a"))));
    assert.equal(
      await exists(`${h.root}/plugins/kubernetes.io/csi/${DRIVER_NAME}`),
      true,
      "the driver's device dir parent stays",
    );

    await h.client.delete(PODS, "app-1", "default");
    await waitFor("pod gone", async () => !(await h.client.get(PODS, "app-1", "default")));
    await waitFor("pod dir removed", async () => !(await exists(podDir(h.root, uid))));
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "kubelet emulator writes vol_data.json before publishing and deletes a running pod after unpublish",
  async fn() {
    await using h = await startHarness();
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    await h.client.create(PVS, csiPv("pv-b"));
    await h.client.create(PVCS, pvc("claim-a", "pv-b"));
    const pod = await h.client.create<Pod>(
      PODS,
      workload("app-2", "exec sleep 60", {
        securityContext: { runAsUser: 1000, runAsGroup: 1000 },
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-a" } }],
      }) as Pod,
    );
    const uid = pod.metadata.uid;
    await waitFor(
      "pod Running",
      async () => (await h.client.get<Pod>(PODS, "app-2", "default"))?.status?.phase === "Running",
    );
    const dir = csiVolumeDir(h.root, uid, "pv-b");
    const volData = await Deno.readTextFile(`${dir}/vol_data.json`);
    const attachment = await crypto.subtle.digest(
      "SHA-256",
      new TextEncoder().encode(`pv-b-handle${DRIVER_NAME}node-1`),
    );
    const hex = [...new Uint8Array(attachment)].map((b) => b.toString(16).padStart(2, "0")).join(
      "",
    );
    assert.equal(
      volData,
      `{"attachmentID":"csi-${hex}","driverName":"${DRIVER_NAME}","nodeName":"node-1","specVolID":"pv-b","volumeHandle":"pv-b-handle","volumeLifecycleMode":"Persistent"}\n`,
    );
    const req = h.csi.of("NodePublishVolume")[0]!.request;
    assert.equal(req.readonly, false);
    assert.equal(req.volumeCapability?.mount?.volumeMountGroup, "", "no fsGroup, no mount group");
    assert.deepEqual(req.secrets, {}, "no secret ref, no secrets");

    const t0 = Date.now();
    await h.client.delete(PODS, "app-2", "default", { gracePeriodSeconds: 5 });
    const terminating = await h.client.get<Pod>(PODS, "app-2", "default");
    assert.ok(terminating?.metadata.deletionTimestamp, "graceful deletion keeps the object");
    await waitFor("pod gone", async () => !(await h.client.get(PODS, "app-2", "default")), {
      timeoutMs: 15_000,
    });
    assert.ok(Date.now() - t0 < 4000, "sleep exits on SIGTERM; no SIGKILL wait");
    const order = h.csi.calls.map((c) => c.method).filter((m) => m !== "NodeGetCapabilities");
    assert.equal(order.at(-1), "NodeUnpublishVolume");
    // The kubelet removes the pod dir right after its final DELETE: wait for it, do not race it.
    await waitFor("the pod dir to be removed", async () => !(await exists(podDir(h.root, uid))), {
      timeoutMs: 10_000,
      intervalMs: 10,
    });
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "kubelet emulator retries a failed publish with FailedMount events and starts no container before success",
  async fn() {
    await using h = await startHarness();
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    h.csi.publishError = new CsiError(Code.INTERNAL, "bucket is unreachable");
    await h.client.create(PVS, csiPv("pv-c"));
    await h.client.create(PVCS, pvc("claim-a", "pv-c"));
    const pod = await h.client.create<Pod>(
      PODS,
      workload("app-3", "true", {
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-a" } }],
      }) as Pod,
    );
    await waitFor("two failed publishes", () => h.csi.of("NodePublishVolume").length >= 2);
    const pending = await h.client.get<Pod>(PODS, "app-3", "default");
    assert.equal(pending?.status?.phase, "Pending");
    assert.equal(
      pending?.status?.containerStatuses?.[0]?.state.waiting?.reason,
      "ContainerCreating",
    );
    // Final error: kubelet removes vol_data.json and the PV dir (once the error came back, which
    // can be after the fake recorded the call; the next retry is ≥ 1 s of back-off away).
    await waitFor(
      "the kubelet to remove the PV dir after the final error",
      async () => !(await exists(csiVolumeDir(h.root, pod.metadata.uid, "pv-c"))),
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    const events = await h.client.list<
      { reason: string; message: string; type: string; count: number }
    >(
      EVENTS,
      { namespace: "default" },
    );
    const failed = events.items.find((e) =>
      e.reason === "FailedMount" && e.message.startsWith("MountVolume.SetUp")
    );
    assert.equal(failed?.type, "Warning");
    assert.equal(
      failed?.message,
      'MountVolume.SetUp failed for volume "pv-c" : rpc error: code = Internal desc = bucket is unreachable',
    );
    h.csi.publishError = undefined;
    await waitFor(
      "pod Succeeded",
      async () =>
        (await h.client.get<Pod>(PODS, "app-3", "default"))?.status?.phase === "Succeeded",
      {
        timeoutMs: 15_000,
      },
    );
    const again = await h.client.list<{ message: string; count: number }>(EVENTS, {
      namespace: "default",
    });
    assert.ok(
      (again.items.find((e) => e.message?.startsWith("MountVolume.SetUp"))?.count ?? 0) >= 2,
      "deduplicated",
    );
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "an uncertain publish error (UNAVAILABLE) is unpublished at deletion although it never succeeded",
  async fn() {
    await using h = await startHarness();
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    h.csi.publishError = new CsiError(Code.UNAVAILABLE, "mounter not ready");
    await h.client.create(PVS, csiPv("pv-d"));
    await h.client.create(PVCS, pvc("claim-a", "pv-d"));
    const pod = await h.client.create<Pod>(
      PODS,
      workload("app-4", "true", {
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-a" } }],
      }) as Pod,
    );
    await waitFor("a failed publish", () => h.csi.of("NodePublishVolume").length >= 1);
    // Uncertain: kubelet keeps vol_data.json and the PV dir.
    assert.equal(
      await exists(`${csiVolumeDir(h.root, pod.metadata.uid, "pv-d")}/vol_data.json`),
      true,
    );
    assert.equal(h.csi.of("NodeUnpublishVolume").length, 0);
    await h.client.delete(PODS, "app-4", "default");
    await waitFor("pod gone", async () => !(await h.client.get(PODS, "app-4", "default")), {
      timeoutMs: 15_000,
    });
    assert.deepEqual(h.csi.of("NodeUnpublishVolume").map((c) => c.request), [{
      volumeId: "pv-d-handle",
      targetPath: csiTargetPath(h.root, pod.metadata.uid, "pv-d"),
    }]);
    await waitFor("pod dir removed", async () => !(await exists(podDir(h.root, pod.metadata.uid))));
  },
});

testOrSkip(ROOT_SKIP, {
  name: "a force-deleted running pod is killed and unpublished without further API writes",
  async fn() {
    await using h = await startHarness();
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    await h.client.create(PVS, csiPv("pv-e"));
    await h.client.create(PVCS, pvc("claim-a", "pv-e"));
    const pod = await h.client.create<Pod>(
      PODS,
      workload("app-5", "exec sleep 60", {
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-a" } }],
      }) as Pod,
    );
    const running = await waitFor("Running", async () => {
      const p = await h.client.get<Pod>(PODS, "app-5", "default");
      return p?.status?.phase === "Running" ? p : undefined;
    });
    const pid = Number(running.status!.containerStatuses![0]!.containerID!.split("/").at(-1));
    await h.client.delete(PODS, "app-5", "default", { gracePeriodSeconds: 0 });
    await waitFor("NodeUnpublishVolume", () => h.csi.of("NodeUnpublishVolume").length === 1, {
      timeoutMs: 10_000,
    });
    assert.equal(await exists(`/proc/${pid}`), false, "container killed before unpublish");
    await waitFor("pod dir removed", async () => !(await exists(podDir(h.root, pod.metadata.uid))));
    assert.equal(await h.client.get(PODS, "app-5", "default"), undefined);
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "NodeGetVolumeStats is called with the target path only when GET_VOLUME_STATS is advertised",
  async fn() {
    await using h = await startHarness({ statsMs: 200 });
    h.csi.capabilities = ["VOLUME_MOUNT_GROUP", "GET_VOLUME_STATS"];
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    await h.client.create(PVS, csiPv("pv-f"));
    await h.client.create(PVCS, pvc("claim-a", "pv-f"));
    const pod = await h.client.create<Pod>(
      PODS,
      workload("app-6", "exec sleep 60", {
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-a" } }],
      }) as Pod,
    );
    await waitFor("two stats runs", () => h.csi.of("NodeGetVolumeStats").length >= 2, {
      timeoutMs: 10_000,
    });
    assert.deepEqual(h.csi.of("NodeGetVolumeStats")[0]!.request, {
      volumeId: "pv-f-handle",
      volumePath: csiTargetPath(h.root, pod.metadata.uid, "pv-f"),
      stagingTargetPath: "",
    });
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "requiresRepublish republishes a running pod's volume with the same request; PV node affinity is checked",
  async fn() {
    await using h = await startHarness({ requiresRepublish: true, republishMs: 150 });
    await waitFor("driver registration", () => h.kubelet.driverRegistered, { timeoutMs: 10_000 });
    await h.client.create(PVS, csiPv("pv-g"));
    await h.client.create(PVCS, pvc("claim-a", "pv-g"));
    await h.client.create(
      PVS,
      csiPv("pv-elsewhere", {
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [{
              matchExpressions: [{
                key: "kubernetes.io/hostname",
                operator: "In",
                values: ["node-9"],
              }],
            }],
          },
        },
      }),
    );
    await h.client.create(PVCS, pvc("claim-b", "pv-elsewhere"));
    await h.client.create(
      PODS,
      workload("app-7", "exec sleep 60", {
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-a" } }],
      }),
    );
    await waitFor("three publishes", () => h.csi.of("NodePublishVolume").length >= 3, {
      timeoutMs: 10_000,
    });
    const [first, ...again] = h.csi.of("NodePublishVolume").map((c) => c.request);
    for (const r of again) assert.deepEqual(r, first, "a republish repeats the request");

    await h.client.create(
      PODS,
      workload("app-8", "true", {
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim-b" } }],
      }),
    );
    const event = await waitFor("NodeAffinity event", async () => {
      const events = await h.client.list<{ message: string }>(EVENTS, { namespace: "default" });
      return events.items.find((e) => e.message.includes("NodeAffinity"));
    });
    assert.equal(
      event.message,
      'MountVolume.NodeAffinity check failed for volume "pv-elsewhere" : no matching NodeSelectorTerms',
    );
  },
});
