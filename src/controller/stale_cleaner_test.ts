import assert from "node:assert/strict";
import type { MountpointS3PodAttachment } from "../api/mountpoint_s3_pod_attachment.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import { MemoryEventRecorder } from "../kube/event_recorder.ts";
import { ApiError } from "../kube/errors.ts";
import { FakeKubeClient } from "../kube/fake_client.ts";
import { Informer } from "../kube/informer.ts";
import { PODS, PVCS, PVS, SERVICE_ACCOUNTS } from "../kube/resources.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  ServiceAccount,
} from "../kube/types.ts";
import {
  ANNOTATION_NEEDS_UNMOUNT,
  COMPONENT_MOUNTPOINT_POD,
  LABEL_COMPONENT,
} from "../mppod/labels.ts";
import type { MountpointPodConfig } from "../mppod/pod_spec.ts";
import { NO_METRICS } from "./metrics.ts";
import { type ControllerCaches, Reconciler, registerIndexes } from "./reconciler.ts";
import { StaleCleaner } from "./stale_cleaner.ts";
import { waitFor } from "../util/wait_for.ts";

const NS = "mount-s3";
const THRESHOLD = 120_000;
const HOUR = 3_600_000;

const POD_CONFIG: MountpointPodConfig = {
  namespace: NS,
  image: "mounter:test",
  imagePullPolicy: "IfNotPresent",
  command: "/bin/s3-csi-mounter",
  driverVersion: "1.0.0",
  mountpointVersion: "rclone",
  priorityClassName: "",
  uid: 1000,
  terminationGraceSeconds: 600,
  extraLabels: {},
  cpuRequest: "",
  memoryRequest: "",
  memoryLimit: "",
  caConfigMap: "",
};

/** A cleaner over a fake API whose clock the test sets (objects are created "now"). */
async function setup() {
  const client = new FakeKubeClient();
  const caches: ControllerCaches = {
    pods: new Informer<Pod>(client, PODS),
    pvcs: new Informer<PersistentVolumeClaim>(client, PVCS),
    pvs: new Informer<PersistentVolume>(client, PVS),
    s3pas: new Informer<MountpointS3PodAttachment>(client, S3PAS),
    serviceAccounts: new Informer<ServiceAccount>(client, SERVICE_ACCOUNTS),
  };
  registerIndexes(caches);
  let now = Date.now();
  const reconciler = new Reconciler({
    client,
    caches,
    podConfig: POD_CONFIG,
    recorder: new MemoryEventRecorder(),
    metrics: NO_METRICS,
  });
  const cleaner = new StaleCleaner({
    client,
    caches,
    reconciler,
    namespace: NS,
    intervalMs: 60_000,
    thresholdMs: THRESHOLD,
    now: () => now,
  });
  const ctl = new AbortController();
  const running = Object.values(caches).map((i) => i.run(ctl.signal));
  await Promise.all(Object.values(caches).map((i) => i.waitForSync(1000)));
  /** Let the informers see the latest writes. */
  const settle = () => new Promise<void>((r) => setTimeout(r, 15));
  return {
    client,
    cleaner,
    settle,
    setNow: (t: number) => (now = t),
    async mpPod(name: string, phase: string, extra: Partial<Pod["metadata"]> = {}) {
      await client.create<Pod>(PODS, {
        metadata: {
          name,
          namespace: NS,
          labels: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
          ...extra,
        },
        spec: { nodeName: "n1", containers: [{ name: "mountpoint", image: "m" }] },
        status: { phase: phase as "Running" },
      });
    },
    async workload(name: string): Promise<string> {
      const p = await client.create<Pod>(PODS, {
        metadata: { name, namespace: "default" },
        spec: { nodeName: "n1", containers: [{ name: "c", image: "i" }] },
      });
      return p.metadata.uid!;
    },
    async s3pa(name: string, attachments: Record<string, { uid: string; ageMs: number }[]>) {
      await client.create<MountpointS3PodAttachment>(
        S3PAS,
        {
          metadata: { name },
          spec: {
            nodeName: "n1",
            persistentVolumeName: `pv-${name}`,
            volumeID: `vol-${name}`,
            mountOptions: "",
            workloadFSGroup: "",
            authenticationSource: "driver",
            mountpointS3PodAttachments: Object.fromEntries(
              Object.entries(attachments).map(([mp, list]) => [
                mp,
                list.map((a) => ({
                  workloadPodUID: a.uid,
                  attachmentTime: new Date(now - a.ageMs).toISOString().replace(/\.\d+Z$/, "Z"),
                })),
              ]),
            ),
          },
        } as MountpointS3PodAttachment,
      );
    },
    pod: (name: string) => client.objects<Pod>(PODS).find((p) => p.metadata.name === name),
    s3paOf: (name: string) =>
      client.objects<MountpointS3PodAttachment>(S3PAS).find((s) => s.metadata.name === name),
    async [Symbol.asyncDispose]() {
      ctl.abort();
      await Promise.all(running);
    },
  };
}

Deno.test("stale cleaner: an attachment with no workload left is deleted", async () => {
  await using h = await setup();
  await h.s3pa("empty", {});
  await h.s3pa("emptied", { "mp-x": [] });
  await h.settle();
  const report = await h.cleaner.cleanOnce();
  assert.equal(report.deletedEmpty, 2);
  assert.equal(h.s3paOf("empty"), undefined);
  assert.equal(h.s3paOf("emptied"), undefined);
});

Deno.test("stale cleaner: entries of vanished workloads go after the threshold, not before; live ones stay", async () => {
  await using h = await setup();
  const live = await h.workload("alive");
  await h.mpPod("mp-a", "Running");
  await h.s3pa("a", {
    "mp-a": [
      { uid: live, ageMs: 10 * HOUR }, // old, but its pod exists: kept
      { uid: "gone-young", ageMs: THRESHOLD / 2 }, // pod gone, too young: kept
      { uid: "gone-old", ageMs: THRESHOLD * 2 }, // pod gone, old: removed
    ],
  });
  await h.settle();
  const report = await h.cleaner.cleanOnce();
  assert.equal(report.removedAttachments, 1);
  const uids = h.s3paOf("a")!.spec.mountpointS3PodAttachments["mp-a"]!.map((x) => x.workloadPodUID);
  assert.deepEqual(uids.sort(), [live, "gone-young"].sort());
  assert.equal(h.pod("mp-a")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], undefined);
});

Deno.test("stale cleaner: removing the last entry of a Mountpoint Pod asks it to unmount; an attachment left empty is deleted", async () => {
  await using h = await setup();
  await h.mpPod("mp-b", "Running");
  await h.s3pa("b", { "mp-b": [{ uid: "gone-1", ageMs: HOUR }, { uid: "gone-2", ageMs: HOUR }] });
  await h.settle();
  const report = await h.cleaner.cleanOnce();
  assert.equal(report.removedAttachments, 2);
  assert.equal(h.s3paOf("b"), undefined, "attachment deleted");
  assert.equal(h.pod("mp-b")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], "true");
});

Deno.test("stale cleaner: orphan Mountpoint Pods — running ones are asked to unmount, others deleted, young, terminating, referenced and foreign ones left alone", async () => {
  await using h = await setup();
  const created = Date.now();
  await h.mpPod("orphan-running", "Running");
  await h.mpPod("orphan-asked", "Running", {
    annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" },
  });
  await h.mpPod("orphan-pending", "Pending");
  await h.mpPod("orphan-failed", "Failed");
  await h.mpPod("orphan-terminating", "Running", { finalizers: ["example.com/hold"] });
  await h.client.delete(PODS, "orphan-terminating", NS); // stays, with a deletionTimestamp
  await h.mpPod("referenced", "Running");
  await h.s3pa("r", { referenced: [{ uid: await h.workload("w"), ageMs: 0 }] });
  // Not Mountpoint Pods: another namespace, and no component label.
  await h.client.create<Pod>(PODS, {
    metadata: {
      name: "elsewhere",
      namespace: "default",
      labels: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
    },
    spec: { containers: [] },
    status: { phase: "Pending" },
  });
  await h.client.create<Pod>(PODS, {
    metadata: { name: "unlabelled", namespace: NS },
    spec: { containers: [] },
    status: { phase: "Pending" },
  });
  await h.settle();
  // Young: nothing happens.
  h.setNow(created + THRESHOLD / 2);
  assert.deepEqual(await h.cleaner.cleanOnce(), {
    removedAttachments: 0,
    deletedEmpty: 0,
    orphanPods: 0,
  });
  const writes = { ...h.client.writes };
  // Old: the four orphans are handled; one of them was already asked.
  h.setNow(created + THRESHOLD * 2);
  const report = await h.cleaner.cleanOnce();
  assert.equal(report.orphanPods, 4);
  await h.settle();
  assert.equal(h.pod("orphan-running")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], "true");
  assert.equal(h.pod("orphan-pending"), undefined, "not running: deleted");
  assert.equal(h.pod("orphan-failed"), undefined, "not running: deleted");
  assert.ok(h.pod("orphan-asked"), "already asked: left to unmount");
  assert.ok(h.pod("orphan-terminating"), "terminating: left alone");
  assert.ok(h.pod("referenced")?.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT] === undefined);
  assert.ok(h.pod("elsewhere") && h.pod("unlabelled"), "not Mountpoint Pods: untouched");
  // Writes: one patch (orphan-running) and two deletes — nothing for the already-asked one.
  assert.equal((h.client.writes.update ?? 0) - (writes.update ?? 0), 1);
  assert.equal((h.client.writes.delete ?? 0) - (writes.delete ?? 0), 2);
});

Deno.test("stale cleaner: releaseGone() removes entries of vanished workloads at once, whatever their age; live entries and orphan Mountpoint Pods stay", async () => {
  await using h = await setup();
  const created = Date.now();
  const live = await h.workload("alive");
  await h.mpPod("mp-a", "Running");
  await h.mpPod("mp-b", "Running");
  await h.mpPod("orphan", "Running");
  await h.s3pa("a", {
    "mp-a": [{ uid: live, ageMs: 0 }, { uid: "gone-just-now", ageMs: 0 }],
  });
  await h.s3pa("b", { "mp-b": [{ uid: "gone-1", ageMs: 0 }, { uid: "gone-2", ageMs: HOUR }] });
  await h.s3pa("empty", {});
  await h.settle();
  // Long after: an orphan this old would be retired by a periodic pass, not by this one.
  h.setNow(created + THRESHOLD * 2);
  const report = await h.cleaner.releaseGone();
  assert.deepEqual(report, { removedAttachments: 3, deletedEmpty: 1, orphanPods: 0 });
  await h.settle();
  const uids = h.s3paOf("a")!.spec.mountpointS3PodAttachments["mp-a"]!.map((x) => x.workloadPodUID);
  assert.deepEqual(uids, [live]);
  assert.equal(h.pod("mp-a")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], undefined);
  assert.equal(h.s3paOf("b"), undefined, "no workload left: attachment deleted");
  assert.equal(h.pod("mp-b")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], "true");
  assert.equal(h.s3paOf("empty"), undefined);
  assert.equal(h.pod("orphan")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], undefined);
});

Deno.test("stale cleaner: run() releases vanished workloads at start, without waiting for the interval", async () => {
  await using h = await setup(); // interval: one minute
  await h.mpPod("mp-g", "Running");
  await h.s3pa("g", { "mp-g": [{ uid: "deleted-while-down", ageMs: 0 }] });
  await h.settle();
  const ctl = new AbortController();
  const running = h.cleaner.run(ctl.signal);
  try {
    await waitFor("the attachment released", () => h.s3paOf("g") === undefined, {
      timeoutMs: 10_000,
    });
    assert.equal(h.pod("mp-g")!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT], "true");
  } finally {
    ctl.abort();
    await running;
  }
});

Deno.test("stale cleaner: one failure does not stop the pass, and the next pass retries it", async () => {
  await using h = await setup();
  const created = Date.now();
  await h.mpPod("orphan-1", "Pending");
  await h.mpPod("orphan-2", "Pending");
  await h.settle();
  h.setNow(created + THRESHOLD * 2);
  h.client.failNext = (verb, _r, name) =>
    verb === "delete" && name === "orphan-1"
      ? new ApiError(500, "InternalError", "etcd timeout")
      : undefined;
  const report = await h.cleaner.cleanOnce();
  h.client.failNext = undefined;
  assert.equal(report.orphanPods, 2);
  await h.settle();
  assert.ok(h.pod("orphan-1"), "its delete failed");
  assert.equal(h.pod("orphan-2"), undefined, "the next one was still handled");
  await h.cleaner.cleanOnce();
  await h.settle();
  assert.equal(h.pod("orphan-1"), undefined, "retried on the next pass");
});

Deno.test("stale cleaner: run() passes every interval until aborted", async () => {
  const client = new FakeKubeClient();
  const caches = {
    pods: new Informer<Pod>(client, PODS),
    pvcs: new Informer<PersistentVolumeClaim>(client, PVCS),
    pvs: new Informer<PersistentVolume>(client, PVS),
    s3pas: new Informer<MountpointS3PodAttachment>(client, S3PAS),
    serviceAccounts: new Informer<ServiceAccount>(client, SERVICE_ACCOUNTS),
  };
  registerIndexes(caches);
  let passes = 0;
  const ctl = new AbortController();
  const cleaner = new StaleCleaner({
    client,
    caches,
    reconciler: {} as Reconciler,
    namespace: NS,
    intervalMs: 5,
    thresholdMs: THRESHOLD,
    now: () => {
      if (++passes === 3) ctl.abort();
      return Date.now();
    },
  });
  await cleaner.run(ctl.signal);
  assert.equal(passes, 3);
});
