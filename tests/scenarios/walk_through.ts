/**
 * The walk-through `deno task sandbox` runs by default (`--scenario walk-through`): a bucket, a
 * static PV/PVC, a workload Pod that writes and reads a file through the mount, the object checked
 * in S3, a reader on the second node (when there is one), then the workload deleted and its
 * Mountpoint Pod released; then dynamic provisioning: a StorageClass of the driver, a PVC (→
 * CreateVolume, a new bucket), a pod writing through it, the object checked in S3, the PVC deleted
 * (→ DeleteVolume, bucket gone). Every wait is bounded by the cluster's step timeout (the
 * sandbox's `--timeout`) and, when it runs out, fails its step naming what it waited for and what
 * was seen (the last FailedMount event, the controller's last warning). Nothing is "pending": a
 * step completes or the run fails; a step that does not complete ends its part.
 *
 * @module
 */
import { GetObjectCommand } from "@aws-sdk/client-s3";
import type { KubeObject } from "../../src/kube/client.ts";
import { EVENTS, PODS, PVCS, PVS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../testbed/kubelet/k8s_types.ts";
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../../src/mppod/labels.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import { TimeoutError } from "../../src/util/errors.ts";
import { waitFor } from "../../src/util/wait_for.ts";
import { type Scenario, type ScenarioCluster, ScenarioSkipped, type Step } from "./cluster.ts";

/** Names used by the walk-through (the PV and StorageClass get a run suffix on a shared tier). */
export const WALK_THROUGH_NAMES = {
  pv: "sandbox-pv",
  pvc: "sandbox-pvc",
  pod: "sandbox-writer",
  reader: "sandbox-reader",
  key: "hello.txt",
  storageClass: "sandbox-s3",
  dynamicPvc: "sandbox-dynamic-pvc",
  dynamicPod: "sandbox-dynamic-writer",
  dynamicKey: "dynamic.txt",
} as const;
const N = WALK_THROUGH_NAMES;

/** The sandbox's walk-through: static and dynamic volumes end to end. */
export const WALK_THROUGH: Scenario = {
  name: "walk-through: static and dynamic volumes, pods writing through them, objects in S3",
  nodes: 1,
  async run(e, step) {
    await staticVolume(e, step);
    await dynamicProvisioning(e, step);
  },
};

/** A one-container workload that runs `script` with `$MESSAGE` set and the claim at `/data`. */
function writerPod(
  e: ScenarioCluster,
  name: string,
  claim: string,
  script: string,
  message: string,
): Pod {
  const { image, pullPolicy } = e.workloadImage;
  return {
    metadata: { name, namespace: e.ns },
    spec: {
      restartPolicy: "Never",
      // No service-account token volume (a projected volume the kubelet emulator cannot serve).
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 10,
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
      containers: [{
        name: "writer",
        image,
        ...(pullPolicy ? { imagePullPolicy: pullPolicy } : {}),
        command: ["sh", "-c", script],
        env: [{ name: "MESSAGE", value: message }],
        volumeMounts: [{ name: "s3", mountPath: "/data" }],
      }],
      volumes: [{ name: "s3", persistentVolumeClaim: { claimName: claim } }],
    },
  } as unknown as Pod;
}

/**
 * `waitFor` bounded by the cluster's step timeout; a timeout says what was waited for, plus what
 * `context` finds out about why (the last FailedMount event, the controller's last warning, …).
 */
async function waitStep<T>(
  e: ScenarioCluster,
  what: string,
  check: () => T | Promise<T>,
  context?: () => Promise<string | undefined>,
): Promise<Exclude<NonNullable<T>, false | "" | 0>> {
  const timeoutMs = e.stepTimeoutMs;
  try {
    return await waitFor(what, check, { timeoutMs, intervalMs: 200 });
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    const why = await context?.().catch(() => undefined);
    throw new Error(
      `timed out after ${timeoutMs / 1000} s waiting for ${what}${why ? ` (${why})` : ""}`,
    );
  }
}

interface EventLike extends KubeObject {
  reason?: string;
  message?: string;
  involvedObject?: { uid?: string };
}

/** The last event with `reason` about the object `uid`, as "reason: message". */
async function lastEvent(
  e: ScenarioCluster,
  uid: string,
  reasons: readonly string[],
): Promise<string | undefined> {
  const events = await e.client.list<EventLike>(EVENTS, { namespace: e.ns });
  const last = events.items.filter((ev) =>
    ev.involvedObject?.uid === uid && reasons.includes(ev.reason ?? "")
  ).at(-1);
  return last ? `last ${last.reason}: ${last.message}` : undefined;
}

/** Why a pod is not done yet: its phase and its last volume event. */
async function podContext(e: ScenarioCluster, name: string): Promise<string> {
  const p = await e.client.get<Pod>(PODS, name, e.ns);
  if (!p) return "the pod is gone";
  const ev = await lastEvent(e, p.metadata.uid, ["FailedMount", "FailedScheduling"]);
  return [`phase ${p.status?.phase ?? "none"}`, ev].filter(Boolean).join("; ");
}

/**
 * A step whose completion the walk-through needs before going on: resolves with the value `fn`
 * returned, or undefined when the step did not complete (it failed or was skipped).
 */
async function needed<T>(
  step: Step,
  name: string,
  fn: () => Promise<T>,
  detail: (v: T) => string = () => "",
): Promise<T | undefined> {
  let out: { v: T } | undefined;
  await step(name, async () => {
    const v = await fn();
    out = { v };
    return detail(v);
  });
  return out?.v;
}

/**
 * The static volume, one step after the other: a step that does not complete ends this part
 * (what it would have needed is missing); the cluster's teardown still cleans up.
 */
async function staticVolume(e: ScenarioCluster, step: Step): Promise<void> {
  const c = e.client;
  const ns = e.ns;
  const pvName = e.uniqueName(N.pv);
  const content = `hello from the s3-csi sandbox ${new Date().toISOString()}`;
  const bucket = await needed(step, "Bucket created in S3", () => e.bucket("sandbox"), (b) => b);
  if (!bucket) return;
  const bound = await needed(step, "PV and PVC bound (static provisioning)", async () => {
    e.onCreated(PVS, pvName);
    await c.create(PVS, {
      metadata: { name: pvName },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteMany"],
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: "",
        // Both, so the volume works on either engine (rclone cannot refuse overwrites).
        mountOptions: ["allow-delete", "allow-overwrite"],
        csi: {
          driver: DRIVER_NAME,
          volumeHandle: `${bucket}-volume`,
          volumeAttributes: { bucketName: bucket },
        },
      },
    });
    // kube-controller-manager binds a claim naming a PV it has not seen yet only at its next
    // resync (15 s): let the PV become Available first.
    await waitStep(e, `PV ${pvName} to be Available`, async () => {
      const pv = await c.get<PersistentVolume>(PVS, pvName);
      return pv?.status?.phase === "Available";
    });
    await c.create(PVCS, {
      metadata: { name: N.pvc, namespace: ns },
      spec: {
        accessModes: ["ReadWriteMany"],
        storageClassName: "",
        resources: { requests: { storage: "1Gi" } },
        volumeName: pvName,
      },
    });
    await waitStep(e, `PVC ${ns}/${N.pvc} to be Bound`, async () => {
      const pvc = await c.get<PersistentVolumeClaim>(PVCS, N.pvc, ns);
      return pvc?.status?.phase === "Bound";
    });
    return `${N.pvc} ⇄ ${pvName}`;
  }, (d) => d);
  if (!bound) return;
  const keep = e.keepWorkloads;
  const created = await needed(step, "Workload pod scheduled", async () => {
    await c.create<Pod>(
      PODS,
      writerPod(
        e,
        N.pod,
        N.pvc,
        `echo "$MESSAGE" > /data/${N.key} && cat /data/${N.key}${
          keep ? " && exec sleep 86400" : ""
        }`,
        content,
      ),
    );
    return await waitStep(
      e,
      `pod ${ns}/${N.pod} to be scheduled`,
      async () => {
        const p = await c.get<Pod>(PODS, N.pod, ns);
        return p?.spec.nodeName ? p : undefined;
      },
      () => podContext(e, N.pod),
    );
  }, (p) => `${ns}/${p.metadata.name} on ${p.spec.nodeName}`);
  if (!created) return;
  const uid = created.metadata.uid;

  const attached = await needed(
    step,
    "Controller: S3PA + Mountpoint Pod for the workload",
    async () => {
      let mpName = "";
      const s3pa = await waitStep(
        e,
        `a MountpointS3PodAttachment naming pod ${ns}/${N.pod} and its Mountpoint Pod`,
        async () => {
          const list = await c.list<
            & {
              spec?: { mountpointS3PodAttachments?: Record<string, { workloadPodUID: string }[]> };
            }
            & KubeObject
          >(S3PAS);
          for (const a of list.items) {
            for (const [mp, ws] of Object.entries(a.spec?.mountpointS3PodAttachments ?? {})) {
              if (!ws.some((w) => w.workloadPodUID === uid)) continue;
              mpName = mp;
              if (await c.get(PODS, mp, e.mpNamespace)) return a.metadata?.name;
            }
          }
          return undefined;
        },
        async () => {
          const why = await e.controllerProblem();
          return [
            mpName ? `S3PA names Mountpoint Pod ${mpName}, which does not exist` : "",
            why ?? "",
          ].filter(Boolean).join("; ") || undefined;
        },
      );
      return `${s3pa} → Mountpoint Pod ${mpName}`;
    },
    (d) => d,
  );
  if (!attached) return;

  const done = await needed(
    step,
    "Volume published; workload wrote and read a file through the mount",
    () =>
      waitStep(
        e,
        keep
          ? `pod ${ns}/${N.pod} to run and print what it wrote`
          : `pod ${ns}/${N.pod} to succeed`,
        async () => {
          const pod = await c.get<Pod>(PODS, N.pod, ns);
          const phase = pod?.status?.phase;
          if (phase === "Succeeded") return pod;
          // With --keep the workload stays up (sleeping) after writing and reading.
          if (keep && phase === "Running" && (await e.log(pod!, "writer")).includes(content)) {
            return pod;
          }
          if (phase === "Failed") {
            const log = await e.log(created, "writer");
            throw new Error(`the workload failed: ${log.trim().split("\n").slice(-2).join(" | ")}`);
          }
          if (!pod) throw new Error("the workload pod is gone");
          return undefined;
        },
        () => podContext(e, N.pod),
      ),
    () => `read back "${content.slice(0, 32)}…"`,
  );
  if (!done) return;
  const landed = await needed(step, "Object landed in S3", async () => {
    const log = await e.log(done, "writer");
    if (!log.includes(content)) throw new Error(`the workload printed ${JSON.stringify(log)}`);
    const body = await e.get(bucket, N.key);
    if (body.trim() !== content) {
      throw new Error(`s3://${bucket}/${N.key} holds ${JSON.stringify(body)}`);
    }
    return `s3://${bucket}/${N.key}`;
  }, (d) => d);
  if (!landed) return;
  const nodes = e.nodeNames();
  if (nodes.length > 1) {
    const read = await needed(
      step,
      "Second node: a reader pod on node-2 reads the file through its own mount",
      async () => {
        const { image, pullPolicy } = e.workloadImage;
        const reader = await c.create<Pod>(PODS, {
          metadata: { name: N.reader, namespace: ns },
          spec: {
            restartPolicy: "Never",
            // No service-account token volume (a projected volume the kubelet emulator cannot serve).
            automountServiceAccountToken: false,
            nodeSelector: { "kubernetes.io/hostname": nodes[1]! },
            securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
            containers: [{
              name: "reader",
              image,
              ...(pullPolicy ? { imagePullPolicy: pullPolicy } : {}),
              command: ["sh", "-c", `cat /data/${N.key}`],
              volumeMounts: [{ name: "s3", mountPath: "/data", readOnly: true }],
            }],
            volumes: [{
              name: "s3",
              persistentVolumeClaim: { claimName: N.pvc, readOnly: true },
            }],
          },
        } as unknown as Pod);
        const p = await waitStep(
          e,
          `pod ${ns}/${N.reader} to finish`,
          async () => {
            const p = await c.get<Pod>(PODS, N.reader, ns);
            const phase = p?.status?.phase;
            return phase === "Succeeded" || phase === "Failed" ? p : undefined;
          },
          () => podContext(e, N.reader),
        );
        const log = await e.log(reader, "reader");
        if (p.status?.phase === "Failed" || log.trim() !== content) {
          throw new Error(`the reader on ${p.spec.nodeName} printed ${JSON.stringify(log)}`);
        }
        await c.delete(PODS, N.reader, ns);
        return p.spec.nodeName ?? "";
      },
      (node) => `read-only mount on ${node}, same content`,
    );
    if (read === undefined) return;
  }
  if (!keep) await deleteWorkload(e, step);
}

/** The static workload's deletion and the Mountpoint Pod's release. */
async function deleteWorkload(e: ScenarioCluster, step: Step): Promise<void> {
  const c = e.client;
  const ns = e.ns;
  const deleted = await needed(
    step,
    "Workload deleted: containers stopped, NodeUnpublishVolume, pod removed",
    async () => {
      await c.delete(PODS, N.pod, ns);
      await c.delete(PODS, N.reader, ns).catch(() => false);
      await waitStep(
        e,
        `pods ${ns}/${N.pod} and ${N.reader} to be gone`,
        async () => !(await c.get(PODS, N.pod, ns)) && !(await c.get(PODS, N.reader, ns)),
      );
      return true;
    },
  );
  if (!deleted) return;
  await step("Mountpoint Pod released (needs-unmount → Succeeded → deleted)", async () => {
    const selector = {
      namespace: e.mpNamespace,
      labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
    };
    await waitStep(
      e,
      `the Mountpoint Pods in ${e.mpNamespace} to be gone`,
      async () => !(await c.list(PODS, selector)).items.length,
      async () => {
        const left = (await c.list<Pod>(PODS, selector)).items;
        return left.map((p) => `${p.metadata.name}: ${p.status?.phase ?? "?"}`).join(", ");
      },
    );
  });
}

/**
 * Dynamic provisioning: StorageClass (default bucket mode, `deletePolicy: delete-all`) → PVC →
 * CreateVolume (a new bucket) → PV bound → a pod writes through it → the object in S3 → pod and
 * PVC deleted → DeleteVolume → PV and bucket gone. Skipped only on s3rver, which lacks bucket APIs
 * CreateVolume uses (seen in the ProvisioningFailed event, not assumed).
 */
async function dynamicProvisioning(e: ScenarioCluster, step: Step): Promise<void> {
  const c = e.client;
  const ns = e.ns;
  const scName = e.uniqueName(N.storageClass);
  const content = `dynamically provisioned ${new Date().toISOString()}`;
  const provisioned = await needed(
    step,
    "Dynamic provisioning: StorageClass + PVC → CreateVolume, PV bound, new bucket",
    async () => {
      const problem = e.provisioningProblem();
      if (problem) throw new Error(problem);
      e.onCreated(STORAGE_CLASSES, scName);
      await c.create(STORAGE_CLASSES, {
        metadata: { name: scName },
        provisioner: DRIVER_NAME,
        reclaimPolicy: "Delete",
        volumeBindingMode: "Immediate",
        mountOptions: ["allow-delete", "allow-overwrite"],
        parameters: { deletePolicy: "delete-all" },
      });
      const pvc = await c.create<PersistentVolumeClaim>(PVCS, {
        metadata: { name: N.dynamicPvc, namespace: ns },
        spec: {
          storageClassName: scName,
          accessModes: ["ReadWriteMany"],
          resources: { requests: { storage: "1Gi" } },
        },
      });
      const bound = await waitStep(
        e,
        `PVC ${ns}/${N.dynamicPvc} to be Bound`,
        async () => {
          const got = await c.get<PersistentVolumeClaim>(PVCS, N.dynamicPvc, ns);
          if (got?.status?.phase === "Bound") return got;
          if (e.s3Env.S3_SERVER === "s3rver") {
            // The fake lacks some bucket APIs CreateVolume uses: say so instead of timing out.
            const failed = (await c.list<EventLike>(EVENTS, { namespace: ns })).items.find((ev) =>
              ev.reason === "ProvisioningFailed" && ev.involvedObject?.uid === pvc.metadata.uid &&
              /NotImplemented/.test(ev.message ?? "")
            );
            if (failed) {
              throw new ScenarioSkipped(
                `s3rver does not implement what CreateVolume needs (${
                  failed.message?.replace(/^.*NotImplemented: /, "")
                }); use RGW (root)`,
              );
            }
          }
          return undefined;
        },
        () => lastEvent(e, pvc.metadata.uid ?? "", ["ProvisioningFailed", "Provisioning"]),
      );
      const pvName = bound.spec.volumeName ?? `pvc-${pvc.metadata.uid}`;
      const pv = await c.get<PersistentVolume>(PVS, pvName);
      const bucket = pv?.spec.csi?.volumeAttributes?.bucketName;
      if (!bucket) throw new Error(`PV ${pvName} names no bucket`);
      if (!(await e.bucketExists(bucket))) throw new Error(`bucket ${bucket} does not exist`);
      return { pv: pvName, bucket };
    },
    (p) => `${N.dynamicPvc} ⇄ ${p.pv}, bucket ${p.bucket}`,
  );
  if (!provisioned) {
    await c.delete(PVCS, N.dynamicPvc, ns).catch(() => false);
    return;
  }
  const wrote = await needed(
    step,
    "Dynamic volume: a pod wrote a file through the mount",
    async () => {
      const pod = await c.create<Pod>(
        PODS,
        writerPod(
          e,
          N.dynamicPod,
          N.dynamicPvc,
          `echo "$MESSAGE" > /data/${N.dynamicKey}`,
          content,
        ),
      );
      const p = await waitStep(
        e,
        `pod ${ns}/${N.dynamicPod} to succeed`,
        async () => {
          const p = await c.get<Pod>(PODS, N.dynamicPod, ns);
          if (p?.status?.phase === "Failed") {
            const log = await e.log(pod, "writer");
            throw new Error(`the pod failed: ${log.trim().split("\n").slice(-2).join(" | ")}`);
          }
          return p?.status?.phase === "Succeeded" ? p : undefined;
        },
        () => podContext(e, N.dynamicPod),
      );
      return p.spec.nodeName ?? "";
    },
    (node) => `on ${node}`,
  );
  if (wrote === undefined) return;
  const landed = await needed(step, "Dynamic volume: object landed in S3", async () => {
    const obj = await e.s3.send(
      new GetObjectCommand({ Bucket: provisioned.bucket, Key: N.dynamicKey }),
    );
    const body = (await obj.Body!.transformToString()).trim();
    if (body !== content) throw new Error(`the object holds ${JSON.stringify(body)}`);
    return `s3://${provisioned.bucket}/${N.dynamicKey}`;
  }, (d) => d);
  if (landed === undefined) return;
  await step(
    "Dynamic volume: pod and PVC deleted → DeleteVolume, PV and bucket gone (delete-all)",
    async () => {
      await c.delete(PODS, N.dynamicPod, ns).catch(() => false);
      await waitStep(
        e,
        `pod ${ns}/${N.dynamicPod} to be gone`,
        async () => !(await c.get(PODS, N.dynamicPod, ns)),
      );
      await c.delete(PVCS, N.dynamicPvc, ns);
      await waitStep(
        e,
        `PV ${provisioned.pv} to be gone`,
        async () => !(await c.get(PVS, provisioned.pv)),
      );
      await waitStep(
        e,
        `bucket ${provisioned.bucket} to be gone`,
        async () => !(await e.bucketExists(provisioned.bucket)),
      );
      return `${provisioned.pv}, ${provisioned.bucket}`;
    },
  );
  await c.delete(STORAGE_CLASSES, scName).catch(() => false);
}
