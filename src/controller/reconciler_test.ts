import assert from "node:assert/strict";
import type { MountpointS3PodAttachment } from "../api/mountpoint_s3_pod_attachment.ts";
import { FakeKubeClient, objectKey } from "../kube/fake_client.ts";
import type { KubeObject } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import {
  ApiEventRecorder,
  type EventRecorder,
  MemoryEventRecorder,
} from "../kube/event_recorder.ts";
import { ApiError } from "../kube/errors.ts";
import { EVENTS, NODES, PODS, PVCS, PVS, SERVICE_ACCOUNTS } from "../kube/resources.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  ServiceAccount,
} from "../kube/types.ts";
import {
  ANNOTATION_BROKEN,
  ANNOTATION_NEEDS_UNMOUNT,
  GATE_RESERVE_HEADROOM,
  LABEL_COMPONENT,
  LABEL_DRIVER_VERSION,
  LABEL_HEADROOM_ROLE,
  LABEL_NEEDS_UNMOUNT,
} from "../mppod/labels.ts";
import { SCHEDULING_TOLERATIONS } from "../mppod/tolerations.ts";
import type { MountpointPodConfig } from "../mppod/pod_spec.ts";
import { inlineVolumeHandle } from "../csi/inline_volume.ts";
import { type ControllerMetrics, NO_METRICS } from "./metrics.ts";
import { type ControllerCaches, Reconciler, registerIndexes } from "./reconciler.ts";
import type { HeadroomConfig } from "./headroom_pods.ts";

const POD_CONFIG: MountpointPodConfig = {
  namespace: "mount-s3",
  image: "mounter:test",
  imagePullPolicy: "IfNotPresent",
  command: "/bin/s3-csi-mounter",
  driverVersion: "1.0.0",
  mountpointVersion: "rclone",
  priorityClassName: "mount-s3-critical",
  uid: 1000,
  terminationGraceSeconds: 600,
  extraLabels: {},
  cpuRequest: "50m",
  memoryRequest: "64Mi",
  memoryLimit: "",
  caConfigMap: "",
};

function pv(name: string, extra: Partial<PersistentVolume["spec"]> = {}): PersistentVolume {
  return {
    metadata: { name },
    spec: {
      csi: {
        driver: "s3.csi.scality.com",
        volumeHandle: `${name}-handle`,
        volumeAttributes: { bucketName: "b" },
      },
      claimRef: { name: `claim-${name}`, namespace: "default" },
      mountOptions: ["allow-delete"],
      ...extra,
    },
  };
}

function pvc(pvName: string, bound = true): PersistentVolumeClaim {
  return {
    metadata: { name: `claim-${pvName}`, namespace: "default" },
    spec: { volumeName: bound ? pvName : "" },
    status: { phase: bound ? "Bound" : "Pending" },
  };
}

function workload(name: string, pvName: string, node = "node-1", fsGroup?: number): Pod {
  return {
    metadata: { name, namespace: "default" },
    spec: {
      nodeName: node,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: `claim-${pvName}` } }],
      ...(fsGroup !== undefined ? { securityContext: { fsGroup } } : {}),
    },
    status: { phase: "Pending" },
  };
}

/** A workload with an inline volume "data" of the driver (the pod's own Secret "s3-creds"). */
function inlineWorkload(name: string, attrs: Record<string, string> = {}, secret = true): Pod {
  return {
    metadata: { name, namespace: "default" },
    spec: {
      nodeName: "node-1",
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{
        name: "data",
        csi: {
          driver: "s3.csi.scality.com",
          volumeAttributes: { bucketName: "b", mountOptions: "allow-delete, prefix=a/", ...attrs },
          ...(secret ? { nodePublishSecretRef: { name: "s3-creds" } } : {}),
        },
      }],
    },
    status: { phase: "Pending" },
  };
}

interface Harness extends AsyncDisposable {
  client: FakeKubeClient;
  reconciler: Reconciler;
  recorder: MemoryEventRecorder;
  caches: ControllerCaches;
  settle(): Promise<void>;
  reconcileAll(): Promise<void>;
}

async function harness(
  o: {
    recorder?: (client: FakeKubeClient) => EventRecorder;
    metrics?: ControllerMetrics;
    headroom?: HeadroomConfig;
  } = {},
): Promise<Harness> {
  const client = new FakeKubeClient();
  const caches: ControllerCaches = {
    pods: new Informer<Pod>(client, PODS),
    pvcs: new Informer<PersistentVolumeClaim>(client, PVCS),
    pvs: new Informer<PersistentVolume>(client, PVS),
    s3pas: new Informer<MountpointS3PodAttachment>(client, S3PAS),
    serviceAccounts: new Informer<ServiceAccount>(client, SERVICE_ACCOUNTS),
  };
  registerIndexes(caches);
  const recorder = new MemoryEventRecorder();
  const reconciler = new Reconciler({
    client,
    caches,
    podConfig: POD_CONFIG,
    recorder: o.recorder?.(client) ?? recorder,
    metrics: o.metrics ?? NO_METRICS,
    ...(o.headroom ? { headroom: o.headroom } : {}),
  });
  caches.pods.on({ delete: (p) => reconciler.podDeleted(p) });
  const ctl = new AbortController();
  const running = Object.values(caches).map((i) => i.run(ctl.signal));
  await Promise.all(Object.values(caches).map((i) => i.waitForSync(1000)));
  // Settled = every informer's cache holds exactly what the fake API holds (same keys, same
  // resourceVersions): the watch events of every write so far were applied (and their handlers,
  // which run synchronously, have run). Checked after each turn of the event loop, never timed.
  const pairs = [
    [caches.pods, PODS],
    [caches.pvcs, PVCS],
    [caches.pvs, PVS],
    [caches.s3pas, S3PAS],
    [caches.serviceAccounts, SERVICE_ACCOUNTS],
  ] as const;
  const inSync = () =>
    pairs.every(([informer, resource]) => {
      const want = client.objects(resource);
      const have = informer.list();
      return want.length === have.length && want.every((o) =>
        informer.get(objectKey(o))?.metadata.resourceVersion === o.metadata?.resourceVersion
      );
    });
  const settle = async () => {
    for (let turns = 0; !inSync(); turns++) {
      if (turns > 10_000) throw new Error("the informer caches never caught up with the fake API");
      await new Promise<void>((r) => setTimeout(r, 0));
    }
  };
  return {
    client,
    reconciler,
    recorder,
    caches,
    settle,
    async reconcileAll() {
      await settle();
      for (const p of client.objects<Pod>(PODS)) {
        await reconciler.reconcile(`${p.metadata.namespace}/${p.metadata.name}`);
      }
      await settle();
    },
    async [Symbol.asyncDispose]() {
      ctl.abort();
      await Promise.all(running);
    },
  };
}

const s3pas = (h: Harness) => h.client.objects<MountpointS3PodAttachment>(S3PAS);
const mpPods = (h: Harness) =>
  h.client.objects<Pod>(PODS).filter((p) => p.metadata.namespace === "mount-s3");

Deno.test("Reconciler: one workload gets one Mountpoint Pod and one S3PA with the sharing key (2 writes)", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  const w = await h.client.create(PODS, workload("w1", "pv-1", "node-1", 2000));
  const before = { ...h.client.writes };
  await h.reconcileAll();
  assert.equal((h.client.writes.create ?? 0) - (before.create ?? 0), 2, "pod + S3PA");
  const [a] = s3pas(h);
  assert.ok(a);
  assert.deepEqual({ ...a.spec, mountpointS3PodAttachments: undefined }, {
    nodeName: "node-1",
    persistentVolumeName: "pv-1",
    volumeID: "pv-1-handle",
    mountOptions: "allow-delete",
    workloadFSGroup: "2000",
    authenticationSource: "driver",
    mountpointS3PodAttachments: undefined,
  });
  assert.equal(a.metadata.labels?.[LABEL_DRIVER_VERSION], "1.0.0");
  const [mp] = mpPods(h);
  assert.ok(mp);
  assert.deepEqual(Object.keys(a.spec.mountpointS3PodAttachments), [mp.metadata.name]);
  assert.equal(
    a.spec.mountpointS3PodAttachments[mp.metadata.name!]![0]!.workloadPodUID,
    w.metadata.uid,
  );
  assert.equal(mp.metadata.labels?.[LABEL_COMPONENT], "mountpoint-pod");
  assert.deepEqual(mp.spec.tolerations, SCHEDULING_TOLERATIONS, "no NoExecute taint tolerated");
  assert.equal(mp.metadata.ownerReferences, undefined, "no Node object: no owner");
  assert.equal(mp.spec.securityContext?.runAsUser, 1000);
  // Idempotent: a second pass writes nothing.
  const after = { ...h.client.writes };
  await h.reconcileAll();
  assert.deepEqual(h.client.writes, after);
});

Deno.test("Reconciler: three workloads with the same key share; fsGroup, options and nodes separate", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  for (const n of ["a", "b", "c"]) await h.client.create(PODS, workload(n, "pv-1"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 1);
  assert.equal(Object.values(s3pas(h)[0]!.spec.mountpointS3PodAttachments)[0]!.length, 3);
  await h.client.create(PODS, workload("fs", "pv-1", "node-1", 3000));
  await h.client.create(PODS, workload("other-node", "pv-1", "node-2"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 3);
  assert.equal(s3pas(h).length, 3);
});

Deno.test("Reconciler: a shared attachment costs one write", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, workload("a", "pv-1"));
  await h.reconcileAll();
  await h.client.create(PODS, workload("b", "pv-1"));
  await h.settle();
  const before = { ...h.client.writes };
  await h.reconciler.reconcile("default/b");
  const delta = Object.entries(h.client.writes).reduce((n, [k, v]) => n + v - (before[k] ?? 0), 0);
  assert.equal(delta, 1);
});

Deno.test("Reconciler: workloads waiting together for the same key join one write; other nodes, fsGroups and attached ones do not", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  for (const n of ["a", "b", "c"]) await h.client.create(PODS, workload(n, "pv-1"));
  await h.client.create(PODS, workload("other-node", "pv-1", "node-2"));
  await h.client.create(PODS, workload("other-fsgroup", "pv-1", "node-1", 4242));
  await h.settle();
  const before = { ...h.client.writes };
  await h.reconciler.reconcile("default/a");
  const delta = Object.entries(h.client.writes).reduce((n, [k, v]) => n + v - (before[k] ?? 0), 0);
  assert.equal(delta, 2, "one Mountpoint Pod and one attachment for three workloads");
  const [s3pa] = s3pas(h);
  const attached = Object.values(s3pa!.spec.mountpointS3PodAttachments).flat().length;
  assert.equal(attached, 3);
  // b and c find themselves attached: no write.
  await h.settle();
  const after = { ...h.client.writes };
  await h.reconciler.reconcile("default/b");
  await h.reconciler.reconcile("default/c");
  assert.deepEqual(h.client.writes, after);
  await h.reconcileAll();
  assert.equal(s3pas(h).length, 3, "node-2 and fsGroup 4242 have their own attachments");
  assert.equal(mpPods(h).length, 3);
});

Deno.test("Reconciler: detach marks needs-unmount, deletes the S3PA, then deletes the Succeeded pod", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, workload("a", "pv-1"));
  await h.client.create(PODS, workload("b", "pv-1"));
  await h.reconcileAll();
  // The scheduler binds the Mountpoint Pod.
  await h.client.patch(PODS, mpPods(h)[0]!.metadata.name!, "mount-s3", {
    spec: { nodeName: "node-1" },
  });
  await h.client.delete(PODS, "a", "default");
  await h.settle();
  await h.reconciler.reconcile("default/a");
  await h.settle();
  assert.equal(Object.values(s3pas(h)[0]!.spec.mountpointS3PodAttachments)[0]!.length, 1);
  assert.equal(mpPods(h)[0]!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], undefined);
  // The last workload finishes: terminal pods are detached even before they are deleted.
  await h.client.patch(PODS, "b", "default", { status: { phase: "Succeeded" } });
  await h.reconcileAll();
  assert.equal(s3pas(h).length, 0);
  const [mp] = mpPods(h);
  assert.equal(mp!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], "true");
  assert.equal(
    mp!.metadata.labels?.[LABEL_NEEDS_UNMOUNT],
    "true",
    "labelled too: out of the PodDisruptionBudget",
  );
  await h.client.patch(PODS, mp!.metadata.name!, "mount-s3", { status: { phase: "Succeeded" } });
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 0);
});

Deno.test("Reconciler: a Mountpoint Pod the scheduler could not place is deleted at once when its last workload leaves", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, workload("a", "pv-1"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 1);
  await h.client.patch(PODS, mpPods(h)[0]!.metadata.name!, "mount-s3", {
    status: {
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable" }],
    },
  });
  await h.client.delete(PODS, "a", "default");
  await h.settle();
  await h.reconciler.reconcile("default/a");
  await h.settle();
  assert.deepEqual(mpPods(h), [], "nothing was mounted for it: no node plugin would unmount it");
  assert.equal(s3pas(h).length, 0);
});

Deno.test("Reconciler: a Mountpoint Pod is controlled by its Node (kubectl drain sees it managed)", async () => {
  await using h = await harness();
  const node = await h.client.create<KubeObject>(NODES, { metadata: { name: "node-1" } });
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, workload("a", "pv-1"));
  await h.reconcileAll();
  assert.deepEqual(mpPods(h)[0]!.metadata.ownerReferences, [{
    apiVersion: "v1",
    kind: "Node",
    name: "node-1",
    uid: node.metadata!.uid,
    controller: true,
  }]);
});

/** A toleration of the `NoExecute` taint `key`, as a workload would carry it. */
function tolerating(pod: Pod, key: string, seconds?: number): Pod {
  pod.spec.tolerations = [
    {
      key: "node.kubernetes.io/not-ready",
      operator: "Exists",
      effect: "NoExecute",
      tolerationSeconds: 300,
    },
    {
      key,
      operator: "Equal",
      value: "yes",
      effect: "NoExecute",
      ...(seconds ? { tolerationSeconds: seconds } : {}),
    },
    { key: "dedicated", operator: "Exists", effect: "NoSchedule" },
  ];
  return pod;
}

Deno.test("Reconciler: a Mountpoint Pod tolerates scheduling taints and its workloads' NoExecute tolerations, for as long as they stay", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, tolerating(workload("a", "pv-1"), "maintenance", 60));
  await h.reconcileAll();
  assert.deepEqual(mpPods(h)[0]!.spec.tolerations, [
    ...SCHEDULING_TOLERATIONS,
    { key: "maintenance", operator: "Equal", value: "yes", effect: "NoExecute" },
    { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  ]);
});

Deno.test("Reconciler: a workload tolerating a NoExecute taint its key's Mountpoint Pod does not gets its own; equal tolerations share", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, workload("plain", "pv-1"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 1);
  await h.client.create(PODS, tolerating(workload("tolerant", "pv-1"), "maintenance"));
  await h.client.create(PODS, tolerating(workload("tolerant-too", "pv-1"), "maintenance", 30));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 2, "the tolerant workloads share a second Mountpoint Pod");
  const [s3pa] = s3pas(h);
  assert.deepEqual(
    Object.values(s3pa!.spec.mountpointS3PodAttachments).map((l) => l.length).sort(),
    [1, 2],
  );
  // A plain workload fits the tolerant pod too (it tolerates more), but takes the first that fits.
  await h.client.create(PODS, workload("plain-too", "pv-1"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 2);
});

Deno.test("Reconciler: a Mountpoint Pod deleted by hand while workloads remain is recreated", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, workload("a", "pv-1"));
  await h.reconcileAll();
  const name = mpPods(h)[0]!.metadata.name!;
  const uid = mpPods(h)[0]!.metadata.uid;
  await h.client.delete(PODS, name, "mount-s3");
  await h.settle();
  await h.reconciler.reconcile(`mount-s3/${name}`);
  await h.settle();
  const [again] = mpPods(h);
  assert.equal(again?.metadata.name, name, "same deterministic name");
  assert.notEqual(again?.metadata.uid, uid, "a new pod");
});

Deno.test("Reconciler: a Mountpoint Pod marked broken is reported on its workloads and replaced", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  const w = workload("a", "pv-1");
  w.status = { phase: "Running" };
  await h.client.create(PODS, w);
  await h.reconcileAll();
  const [mp] = mpPods(h);
  // It runs (the kubelet says so), then the node plugin marks it.
  await h.client.patch(PODS, mp!.metadata.name!, "mount-s3", { status: { phase: "Running" } });
  await h.reconcileAll();
  await h.client.patch(PODS, mp!.metadata.name!, "mount-s3", {
    metadata: { annotations: { [ANNOTATION_BROKEN]: "its engine failed 6 times within 60 s" } },
  });
  await h.reconcileAll();
  await h.reconciler.reconcile(`mount-s3/${mp!.metadata.name!}`);
  await h.settle();
  const events = h.recorder.events.filter((e) => e.reason === "MountpointPodBroken");
  assert.equal(events.length, 1);
  assert.equal(events[0]!.object, "default/a");
  assert.match(events[0]!.message, /was given up and is replaced: its engine failed 6 times/);
  const [again] = mpPods(h);
  assert.equal(again?.metadata.name, mp!.metadata.name, "replaced under the same name");
  assert.notEqual(again?.metadata.uid, mp!.metadata.uid);
  assert.equal(again?.metadata.annotations?.[ANNOTATION_BROKEN], undefined);
});

Deno.test("Reconciler: a running-but-terminating workload keeps its attachment; a pending one loses it", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  const running = workload("r", "pv-1");
  running.status = { phase: "Running" };
  running.metadata.finalizers = ["test/hold"];
  await h.client.create(PODS, running);
  await h.reconcileAll();
  await h.client.delete(PODS, "r", "default");
  await h.reconcileAll();
  assert.equal(s3pas(h).length, 1, "still attached while running");
  await h.client.patch(PODS, "r", "default", { status: { phase: "Failed" } });
  await h.reconcileAll();
  assert.equal(s3pas(h).length, 0);
});

Deno.test("Reconciler: an unbound PVC and a bad attribute produce Events that say what to do", async () => {
  await using h = await harness();
  await h.client.create(PVCS, pvc("pv-x", false));
  await h.client.create(PODS, workload("a", "pv-x"));
  await h.client.create(
    PVS,
    pv("pv-bad", {
      csi: {
        driver: "s3.csi.scality.com",
        volumeHandle: "h",
        volumeAttributes: { authenticationSource: "magic" },
      },
    }),
  );
  await h.client.create(PVCS, pvc("pv-bad"));
  await h.client.create(PODS, workload("b", "pv-bad"));
  await h.reconcileAll();
  const reasons = h.recorder.events.map((e) => `${e.object} ${e.reason}`);
  assert.ok(reasons.includes("default/a PersistentVolumeClaimUnbound"), reasons.join("; "));
  assert.ok(reasons.includes("default/b InvalidVolume"), reasons.join("; "));
  assert.match(
    h.recorder.events.find((e) => e.reason === "InvalidVolume")!.message,
    /use "driver", "secret" or "pod"/,
  );
  assert.equal(mpPods(h).length, 0);
});

Deno.test("Reconciler: an inline volume gets its pod's own Mountpoint Pod, never shared", async () => {
  await using h = await harness();
  const a = await h.client.create(PODS, inlineWorkload("a"));
  const b = await h.client.create(PODS, inlineWorkload("b"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 2, "identical inline volumes of two pods: two Mountpoint Pods");
  const specOf = (uid: string) => {
    const s3pa = s3pas(h).find((s) =>
      Object.values(s.spec.mountpointS3PodAttachments).flat().some((w) => w.workloadPodUID === uid)
    )!;
    return { ...s3pa.spec, mountpointS3PodAttachments: undefined };
  };
  assert.deepEqual(specOf(a.metadata.uid!), {
    nodeName: "node-1",
    persistentVolumeName: "data",
    volumeID: inlineVolumeHandle(a.metadata.uid!, "data"),
    mountOptions: "allow-delete,prefix=a/",
    workloadFSGroup: "",
    authenticationSource: "secret",
    secretNamespace: "default",
    secretName: "s3-creds",
    mountpointS3PodAttachments: undefined,
  });
  assert.equal(specOf(b.metadata.uid!).volumeID, inlineVolumeHandle(b.metadata.uid!, "data"));
  // A Mountpoint Pod deleted by hand is recreated from the pod's inline volume, even when a
  // PersistentVolume has the volume's name.
  await h.client.create(PVS, pv("data"));
  const mine = s3pas(h).find((s) =>
    s.spec.volumeID === inlineVolumeHandle(a.metadata.uid!, "data")
  )!;
  const mp = Object.keys(mine.spec.mountpointS3PodAttachments)[0]!;
  await h.client.delete(PODS, mp, "mount-s3");
  await h.settle();
  await h.reconciler.reconcile(`mount-s3/${mp}`);
  await h.settle();
  const again = mpPods(h).find((p) => p.metadata.name === mp);
  assert.ok(again, "recreated");
  assert.equal(
    again.metadata.annotations?.["s3.csi.scality.com/volume-id"],
    inlineVolumeHandle(a.metadata.uid!, "data"),
  );
  // The pod ends: its attachment goes, its Mountpoint Pod is told to unmount.
  await h.client.patch(PODS, "a", "default", { status: { phase: "Succeeded" } });
  await h.reconcileAll();
  assert.equal(s3pas(h).length, 1);
  assert.equal(
    mpPods(h).find((p) => p.metadata.name === mp)?.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT],
    "true",
  );
});

Deno.test("Reconciler: pod identity: a Mountpoint Pod per ServiceAccount and role", async () => {
  await using h = await harness();
  const role = (name: string) => `arn:aws:iam:::role/${name}`;
  await h.client.create(SERVICE_ACCOUNTS, {
    metadata: {
      name: "sa-a",
      namespace: "default",
      annotations: { "s3.csi.scality.com/role-arn": role("reader-a") },
    },
  });
  await h.client.create(SERVICE_ACCOUNTS, { metadata: { name: "sa-b", namespace: "default" } });
  const csi = (attrs: Record<string, string>) => ({
    csi: {
      driver: "s3.csi.scality.com",
      volumeHandle: "h-pod",
      volumeAttributes: { bucketName: "b", authenticationSource: "pod", ...attrs },
    },
  });
  await h.client.create(PVS, pv("pv-pod", csi({})));
  await h.client.create(PVCS, pvc("pv-pod"));
  await h.client.create(PVS, pv("pv-pinned", csi({ roleArn: role("pinned") })));
  await h.client.create(PVCS, pvc("pv-pinned"));
  const as = (p: Pod, sa: string): Pod => ({ ...p, spec: { ...p.spec, serviceAccountName: sa } });
  await h.client.create(PODS, as(workload("a1", "pv-pod"), "sa-a"));
  await h.client.create(PODS, as(workload("a2", "pv-pod"), "sa-a"));
  await h.client.create(PODS, as(workload("b1", "pv-pod"), "sa-b"));
  await h.client.create(PODS, as(workload("b2", "pv-pinned"), "sa-b"));
  await h.reconcileAll();
  const specs = s3pas(h).map((s) => s.spec);
  assert.deepEqual(
    specs.map((s) => [
      s.persistentVolumeName,
      s.authenticationSource,
      s.workloadNamespace,
      s.workloadServiceAccountName,
      s.workloadServiceAccountIAMRoleARN,
      Object.values(s.mountpointS3PodAttachments).flat().length,
    ]).sort(),
    [
      ["pv-pinned", "pod", "default", "sa-b", role("pinned"), 1],
      ["pv-pod", "pod", "default", "sa-a", role("reader-a"), 2],
    ],
    "the two pods of sa-a share; the volume's roleArn wins over the (absent) annotation",
  );
  assert.equal(mpPods(h).length, 2);
  const events = h.recorder.events.filter((e) => e.object === "default/b1");
  assert.deepEqual(events.map((e) => e.reason), ["InvalidVolume"]);
  assert.match(
    events[0]!.message,
    /uses authenticationSource=pod but no role is named: set the volume attribute roleArn, or annotate ServiceAccount default\/sa-b with s3.csi.scality.com\/role-arn/,
  );
  // Once sa-b names a role, b1 gets its own Mountpoint Pod (not sa-a's).
  await h.client.patch(SERVICE_ACCOUNTS, "sa-b", "default", {
    metadata: { annotations: { "s3.csi.scality.com/role-arn": role("reader-b") } },
  });
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 3);
  assert.equal(
    s3pas(h).find((s) =>
      s.spec.workloadServiceAccountName === "sa-b" && s.spec.persistentVolumeName === "pv-pod"
    )
      ?.spec.workloadServiceAccountIAMRoleARN,
    role("reader-b"),
  );
});

Deno.test("Reconciler: a pod of another driver is ignored", async () => {
  await using h = await harness();
  await h.client.create(
    PVS,
    pv("pv-ebs", { csi: { driver: "ebs.csi.aws.com", volumeHandle: "vol" } }),
  );
  await h.client.create(PVCS, pvc("pv-ebs"));
  await h.client.create(PODS, workload("a", "pv-ebs"));
  await h.reconcileAll();
  assert.equal(mpPods(h).length, 0);
  assert.equal(h.recorder.events.length, 0);
});

Deno.test("Reconciler: an attachment created by another controller for the same key is reused, not duplicated", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  // An upstream-style S3PA (random name) with a Mountpoint Pod of this driver version.
  await existingAttachment(h, {
    mp: "mp-legacy",
    s3pa: "s3pa-x7k2q",
    version: "1.0.0",
    workloadUID: "old-uid",
  });
  await h.client.create(PODS, workload("new", "pv-1"));
  await h.reconcileAll();
  const all = s3pas(h);
  assert.equal(all.length, 1, "no second attachment");
  assert.equal(all[0]!.spec.mountpointS3PodAttachments["mp-legacy"]!.length, 2);
  assert.equal(mpPods(h).length, 1, "no second Mountpoint Pod");
});

Deno.test("Reconciler: every Event reason, each with a message that says what to fix", async () => {
  let createFailures = 0;
  await using h = await harness({
    metrics: { ...NO_METRICS, mountpointPodCreateFailed: () => createFailures++ },
  });
  const drv = "s3.csi.scality.com";
  // PersistentVolumeClaimNotFound: the claim does not exist.
  await h.client.create(PODS, workload("w-noclaim", "pv-none"));
  // PersistentVolumeClaimUnbound.
  await h.client.create(PVCS, pvc("pv-unbound", false));
  await h.client.create(PODS, workload("w-unbound", "pv-unbound"));
  // PersistentVolumeNotFound: bound to a PV that does not exist.
  await h.client.create(PVCS, pvc("pv-ghost"));
  await h.client.create(PODS, workload("w-ghost", "pv-ghost"));
  // PersistentVolumeMismatch: the PV is claimed by someone else / has no volume handle.
  await h.client.create(
    PVS,
    pv("pv-taken", { claimRef: { name: "other", namespace: "default" } }),
  );
  await h.client.create(PVCS, pvc("pv-taken"));
  await h.client.create(PODS, workload("w-taken", "pv-taken"));
  await h.client.create(PVS, pv("pv-nohandle", { csi: { driver: drv, volumeHandle: "" } }));
  await h.client.create(PVCS, pvc("pv-nohandle"));
  await h.client.create(PODS, workload("w-nohandle", "pv-nohandle"));
  // InvalidVolume: secret authentication without a secret; a resource attribute that is no quantity.
  await h.client.create(
    PVS,
    pv("pv-nosecret", {
      csi: { driver: drv, volumeHandle: "h", volumeAttributes: { authenticationSource: "secret" } },
    }),
  );
  await h.client.create(PVCS, pvc("pv-nosecret"));
  await h.client.create(PODS, workload("w-nosecret", "pv-nosecret"));
  await h.client.create(
    PVS,
    pv("pv-badcpu", {
      csi: {
        driver: drv,
        volumeHandle: "h",
        volumeAttributes: { mountpointContainerResourcesRequestsCpu: "lots" },
      },
    }),
  );
  await h.client.create(PVCS, pvc("pv-badcpu"));
  await h.client.create(PODS, workload("w-badcpu", "pv-badcpu"));
  // InvalidInlineVolume: driver credentials, or no Secret.
  await h.client.create(
    PODS,
    inlineWorkload("w-inline-driver", { authenticationSource: "driver" }),
  );
  await h.client.create(PODS, inlineWorkload("w-inline-nosecret", {}, false));
  // MountpointPodCreateFailed: the API refuses the Mountpoint Pod.
  await h.client.create(PVS, pv("pv-refused"));
  await h.client.create(PVCS, pvc("pv-refused"));
  await h.client.create(PODS, workload("w-refused", "pv-refused"));
  h.client.failNext = (verb, r) =>
    verb === "create" && r === PODS
      ? new ApiError(403, "Forbidden", 'pods is forbidden: User "x" cannot create resource "pods"')
      : undefined;
  await h.settle();
  for (const p of h.client.objects<Pod>(PODS)) {
    await h.reconciler.reconcile(`${p.metadata.namespace}/${p.metadata.name}`).catch(() => {});
  }
  h.client.failNext = undefined;
  const got = (pod: string) => h.recorder.events.filter((e) => e.object === `default/${pod}`);
  const expect: [string, string, RegExp][] = [
    ["w-noclaim", "PersistentVolumeClaimNotFound", /does not exist: create it or fix claimName/],
    [
      "w-unbound",
      "PersistentVolumeClaimUnbound",
      /is not bound yet .*check that a matching PersistentVolume exists/,
    ],
    [
      "w-ghost",
      "PersistentVolumeNotFound",
      /PersistentVolume "pv-ghost" bound to claim "default\/claim-pv-ghost" does not exist/,
    ],
    ["w-taken", "PersistentVolumeMismatch", /is claimed by "default\/other".*fix spec.claimRef/],
    ["w-nohandle", "PersistentVolumeMismatch", /has no spec.csi.volumeHandle: set one/],
    [
      "w-nosecret",
      "InvalidVolume",
      /authenticationSource=secret but has no spec.csi.nodePublishSecretRef: add one/,
    ],
    ["w-badcpu", "InvalidVolume", /is not a Kubernetes quantity .*fix the PersistentVolume/],
    [
      "w-inline-driver",
      "InvalidInlineVolume",
      /Volume "data": Inline volumes cannot use authenticationSource "driver"/,
    ],
    [
      "w-inline-nosecret",
      "InvalidInlineVolume",
      /Volume "data": Inline volume has no nodePublishSecretRef: name a Secret in the pod's namespace/,
    ],
    [
      "w-refused",
      "MountpointPodCreateFailed",
      /Cannot create Mountpoint Pod mount-s3\/.*forbidden.*Check that namespace mount-s3 exists and the controller may create pods there/,
    ],
  ];
  for (const [pod, reason, message] of expect) {
    const events = got(pod);
    assert.deepEqual(events.map((e) => [e.type, e.reason]), [["Warning", reason]], pod);
    assert.match(events[0]!.message, message, pod);
  }
  assert.equal(createFailures, 1);
  assert.equal(mpPods(h).length, 0, "nothing was created for a volume with a problem");
});

Deno.test("Reconciler: a problem that persists is one Event whose count grows", async () => {
  await using h = await harness({
    recorder: (client) => new ApiEventRecorder(client, "s3-csi-controller", "test"),
  });
  await h.client.create(PVCS, pvc("pv-x", false));
  await h.client.create(PODS, workload("a", "pv-x"));
  for (let i = 0; i < 3; i++) await h.reconcileAll();
  const events = h.client.objects<{ reason: string; count: number } & Pod>(EVENTS);
  assert.deepEqual(events.map((e) => [e.reason, e.count]), [["PersistentVolumeClaimUnbound", 3]]);
});

const HEADROOM: HeadroomConfig = {
  namespace: "mount-s3",
  image: "pause:3.10",
  priorityClassName: "mount-s3-headroom",
  preemptingPriorityClassName: "mount-s3-preempting",
};

/** A workload that opted in to headroom: gated, unscheduled, 200m CPU. */
function gatedWorkload(name: string, pvName: string): Pod {
  const w = workload(name, pvName);
  delete w.spec.nodeName;
  w.spec.schedulingGates = [{ name: GATE_RESERVE_HEADROOM }];
  w.spec.containers[0]!.resources = { requests: { cpu: "200m", memory: "100Mi" } };
  w.spec.nodeSelector = { disk: "ssd" };
  w.spec.tolerations = [{ key: "dedicated", operator: "Exists", effect: "NoSchedule" }];
  w.spec.priority = 0;
  return w;
}

const headroomPods = (h: Harness) =>
  mpPods(h).filter((p) => p.metadata.labels?.[LABEL_HEADROOM_ROLE]);
const role = (p: Pod) => p.metadata.labels?.[LABEL_HEADROOM_ROLE];

Deno.test("Reconciler headroom: a gated workload gets a placement pod for it and its Mountpoint Pod, and waits", async () => {
  await using h = await harness({ headroom: HEADROOM });
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, gatedWorkload("w", "pv-1"));
  await h.reconcileAll();
  const [placement, ...more] = headroomPods(h);
  assert.deepEqual(more, []);
  assert.equal(role(placement!), "placement");
  assert.equal(placement!.spec.priorityClassName, "mount-s3-headroom");
  assert.deepEqual(placement!.spec.containers[0]!.resources, {
    requests: { cpu: "250m", memory: String(100 * 2 ** 20 + 64 * 2 ** 20) },
  }, "the workload's requests plus the Mountpoint Pod's (50m, 64Mi)");
  assert.deepEqual(placement!.spec.nodeSelector, { disk: "ssd" }, "where the workload could go");
  assert.deepEqual(placement!.spec.tolerations, [
    { key: "dedicated", operator: "Exists", effect: "NoSchedule" },
  ]);
  assert.equal(s3pas(h).length, 0, "no attachment before the workload is bound");
  assert.ok(h.recorder.events.some((e) => e.reason === "HeadroomReserving"));
  // The scheduler finds no room: the workload hears why.
  await h.client.patch(PODS, placement!.metadata.name!, "mount-s3", {
    status: {
      conditions: [{
        type: "PodScheduled",
        status: "False",
        reason: "Unschedulable",
        message: "0/1 nodes are available: 1 Insufficient cpu.",
      }],
    },
  });
  await h.reconcileAll();
  const pending = h.recorder.events.find((e) => e.reason === "HeadroomPending");
  assert.match(pending?.message ?? "", /Insufficient cpu/);
  const w = h.client.objects<Pod>(PODS).find((p) => p.metadata.name === "w")!;
  assert.deepEqual(w.spec.schedulingGates, [{ name: GATE_RESERVE_HEADROOM }], "still gated");
});

Deno.test("Reconciler headroom: placement bound → workload pinned and ungated, Mountpoint Pod preempting, headroom released once it runs", async () => {
  await using h = await harness({ headroom: HEADROOM });
  const node = await h.client.create<KubeObject>(NODES, { metadata: { name: "node-1" } });
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, gatedWorkload("w", "pv-1"));
  await h.reconcileAll();
  const placement = headroomPods(h)[0]!;
  // Bound by the scheduler; the Priority admission resolved its class.
  await h.client.patch(PODS, placement.metadata.name!, "mount-s3", {
    spec: { nodeName: "node-1", priority: -10 },
  });
  await h.reconcileAll();
  const mpRes = headroomPods(h).find((p) => role(p) === "mountpoint")!;
  assert.ok(mpRes, "a mountpoint headroom pod");
  assert.deepEqual(mpRes.spec.containers[0]!.resources, {
    requests: { cpu: "50m", memory: String(64 * 2 ** 20) },
  });
  assert.match(JSON.stringify(mpRes.spec.affinity), /"values":\["node-1"\]/);
  assert.equal(mpRes.metadata.ownerReferences?.length, 1);
  assert.ok(
    headroomPods(h).some((p) => role(p) === "placement"),
    "left for the workload to preempt",
  );
  let w = h.client.objects<Pod>(PODS).find((p) => p.metadata.name === "w")!;
  assert.equal(w.spec.schedulingGates, undefined, "ungated");
  assert.deepEqual(w.spec.affinity, {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{
          matchFields: [{ key: "metadata.name", operator: "In", values: ["node-1"] }],
        }],
      },
    },
  });
  assert.ok(h.recorder.events.some((e) => e.reason === "HeadroomReserved"));
  // The scheduler binds the workload (after preempting the placement pod).
  await h.client.patch(PODS, "w", "default", { spec: { nodeName: "node-1" } });
  await h.reconcileAll();
  const mp = mpPods(h).find((p) => !role(p))!;
  assert.equal(mp.spec.priorityClassName, "mount-s3-preempting", "it may preempt the headroom");
  assert.deepEqual(headroomPods(h).map(role), ["mountpoint"], "the placement pod is gone");
  await h.client.patch(PODS, mp.metadata.name!, "mount-s3", { status: { phase: "Running" } });
  await h.reconcileAll();
  assert.deepEqual(headroomPods(h), [], "released once the Mountpoint Pod runs");
  w = h.client.objects<Pod>(PODS).find((p) => p.metadata.name === "w")!;
  assert.equal(w.spec.nodeName, "node-1");
  assert.equal(node.metadata?.name, "node-1");
});

Deno.test("Reconciler headroom: a workload that cannot preempt gets the room by the placement pod's deletion", async () => {
  await using h = await harness({ headroom: HEADROOM });
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  const w = gatedWorkload("w", "pv-1");
  w.spec.preemptionPolicy = "Never";
  await h.client.create(PODS, w);
  await h.reconcileAll();
  await h.client.patch(PODS, headroomPods(h)[0]!.metadata.name!, "mount-s3", {
    spec: { nodeName: "node-1", priority: -10 },
  });
  await h.reconcileAll();
  assert.deepEqual(headroomPods(h).map(role), ["mountpoint"]);
});

Deno.test("Reconciler headroom: gone workload → headroom pods deleted; no S3 volume → ungated; off → a Warning", async () => {
  await using h = await harness({ headroom: HEADROOM });
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  await h.client.create(PODS, gatedWorkload("w", "pv-1"));
  await h.reconcileAll();
  assert.equal(headroomPods(h).length, 1);
  await h.client.delete(PODS, "w", "default");
  await h.settle();
  await h.reconciler.reconcile("default/w");
  await h.settle();
  assert.deepEqual(headroomPods(h), []);

  const plain = gatedWorkload("plain", "pv-1");
  plain.spec.volumes = [];
  await h.client.create(PODS, plain);
  await h.reconcileAll();
  const p = h.client.objects<Pod>(PODS).find((x) => x.metadata.name === "plain")!;
  assert.equal(p.spec.schedulingGates, undefined);
  assert.ok(h.recorder.events.some((e) => e.reason === "HeadroomNotNeeded"));

  await using off = await harness();
  await off.client.create(PVS, pv("pv-1"));
  await off.client.create(PVCS, pvc("pv-1"));
  await off.client.create(PODS, gatedWorkload("w", "pv-1"));
  await off.reconcileAll();
  assert.deepEqual(headroomPods(off), []);
  assert.match(
    off.recorder.events.find((e) => e.reason === "HeadroomDisabled")?.message ?? "",
    /remove the gate/,
  );
});

Deno.test("Reconciler: after an upgrade a running workload keeps its old version's Mountpoint Pod; new ones get this version's", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  const running = await h.client.create<Pod>(PODS, workload("running", "pv-1"));
  // Attached and mounted by the controller of the previous release (0.9.0).
  await existingAttachment(h, { ...PREVIOUS, workloadUID: running.metadata.uid! });
  await h.reconcileAll();
  assert.deepEqual(s3pas(h).map((s) => s.metadata.name), ["s3pa-old"], "not attached again");
  assert.deepEqual(mpPods(h).map((p) => p.metadata.name), ["mp-old"], "no idle new pod");

  const next = await h.client.create<Pod>(PODS, workload("new", "pv-1"));
  await h.reconcileAll();
  const mine = s3pas(h).find((s) => s.metadata.name !== "s3pa-old")!;
  assert.ok(mine, "the new workload has an attachment of this version");
  assert.equal(mine.metadata.labels?.[LABEL_DRIVER_VERSION], "1.0.0");
  const [mp, list] = Object.entries(mine.spec.mountpointS3PodAttachments)[0]!;
  assert.notEqual(mp, "mp-old");
  assert.deepEqual(list.map((a) => a.workloadPodUID), [next.metadata.uid], "only the new one");
  assert.equal(
    mpPods(h).find((p) => p.metadata.name === mp)?.metadata.labels?.[LABEL_DRIVER_VERSION],
    "1.0.0",
  );
});

Deno.test("Reconciler: an old version's Mountpoint Pod the node plugin asks to replace comes back of this version", async () => {
  await using h = await harness();
  await h.client.create(PVS, pv("pv-1"));
  await h.client.create(PVCS, pvc("pv-1"));
  // A workload the previous release's controller assigned during the rollout: not yet mounted
  // (pending); the new node plugin refused its pod and marked it for replacement.
  const pending = await h.client.create<Pod>(PODS, workload("pending", "pv-1"));
  await existingAttachment(h, {
    ...PREVIOUS,
    workloadUID: pending.metadata.uid!,
    image: "s3-csi-mounter:0.9.0",
    annotations: {
      [ANNOTATION_BROKEN]:
        "The node plugin asked for a replacement: the pod was made for driver 0.9.0, which this node plugin (driver 1.0.0) cannot use",
    },
  });
  await h.reconcileAll();
  await h.reconciler.reconcile("mount-s3/mp-old");
  await h.settle();
  const [again] = mpPods(h);
  assert.equal(again?.metadata.name, "mp-old", "replaced under the same name");
  assert.equal(again?.metadata.annotations?.[ANNOTATION_BROKEN], undefined);
  assert.equal(
    again?.spec?.containers?.[0]?.image,
    POD_CONFIG.image,
    "the replacement runs this controller's Mountpoint image",
  );
  const events = h.recorder.events.filter((e) => e.reason === "MountpointPodBroken");
  assert.equal(events.length, 1);
  assert.match(events[0]!.message, /asked for a replacement: the pod was made for driver 0\.9\.0/);
});

/**
 * A running Mountpoint Pod and its S3PA on node-1 for volume pv-1, as another controller made them
 * (`version` its driver version), serving `workloadUID`; the pod's `annotations` and `image` as
 * given.
 */
async function existingAttachment(
  h: Awaited<ReturnType<typeof harness>>,
  o: {
    mp: string;
    s3pa: string;
    version: string;
    workloadUID: string;
    annotations?: Record<string, string>;
    image?: string;
  },
): Promise<void> {
  await h.client.create<Pod>(PODS, {
    metadata: {
      name: o.mp,
      namespace: "mount-s3",
      labels: { [LABEL_COMPONENT]: "mountpoint-pod", [LABEL_DRIVER_VERSION]: o.version },
      ...(o.annotations ? { annotations: o.annotations } : {}),
    },
    spec: { containers: [{ name: "mountpoint", ...(o.image ? { image: o.image } : {}) }] },
    status: { phase: "Running" },
  });
  await h.client.create<MountpointS3PodAttachment>(S3PAS, {
    metadata: { name: o.s3pa, labels: { [LABEL_DRIVER_VERSION]: o.version } },
    spec: {
      nodeName: "node-1",
      persistentVolumeName: "pv-1",
      volumeID: "pv-1-handle",
      mountOptions: "allow-delete",
      workloadFSGroup: "",
      authenticationSource: "driver",
      mountpointS3PodAttachments: {
        [o.mp]: [{ workloadPodUID: o.workloadUID, attachmentTime: "2026-01-01T00:00:00Z" }],
      },
    },
  });
}

/** The previous release's Mountpoint Pod and S3PA (0.9.0; this controller is 1.0.0). */
const PREVIOUS = { mp: "mp-old", s3pa: "s3pa-old", version: "0.9.0" };
