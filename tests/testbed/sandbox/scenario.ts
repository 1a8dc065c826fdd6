/**
 * The sandbox's end-to-end scenario: a bucket, a static PV/PVC, a workload Pod that writes and reads
 * a file through the mount, the object checked in S3, then the workload deleted and its Mountpoint
 * Pod released; then dynamic provisioning: a StorageClass of the driver, a PVC (→ CreateVolume, a
 * new bucket), a pod writing through it, the object checked in S3, the PVC deleted (→ DeleteVolume,
 * bucket gone). Every wait is bounded by `--timeout` and, when it runs out, fails its step naming
 * what it waited for and what was seen (the last FailedMount event, the controller's last warning).
 * Nothing is "pending": a step completes or the sandbox fails.
 *
 * @module
 */
import { CreateBucketCommand, GetObjectCommand } from "@aws-sdk/client-s3";
import type { KubeObject } from "../../../src/kube/client.ts";
import { EVENTS, PODS, PVCS, PVS, STORAGE_CLASSES } from "../../../src/kube/resources.ts";
import { S3PAS } from "../../../src/api/mountpoint_s3_pod_attachment.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../kubelet/k8s_types.ts";
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../../../src/mppod/labels.ts";
import { DRIVER_NAME } from "../../../src/util/version.ts";
import type { SandboxEnv } from "./sandbox_env.ts";
import { SkippedError, type StepReporter } from "./step_reporter.ts";
import { TimeoutError } from "../../../src/util/errors.ts";
import { waitFor } from "../../../src/util/wait_for.ts";

/** Names used by the scenario (the PV and StorageClass get a run suffix on the real tier). */
export const SCENARIO = {
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

/** Settings of {@link runScenario}. */
export interface ScenarioOptions {
  readonly bucket: string;
  /** Longest wait of each step. */
  readonly timeoutMs: number;
  /** Leave the workload in place (`--keep`). */
  readonly keepWorkload: boolean;
}

/** A one-container workload that runs `script` with `$MESSAGE` set and the claim at `/data`. */
function writerPod(
  env: SandboxEnv,
  name: string,
  namespace: string,
  claim: string,
  script: string,
  message: string,
): Pod {
  return {
    metadata: { name, namespace },
    spec: {
      restartPolicy: "Never",
      // No service-account token volume (a projected volume the kubelet emulator cannot serve).
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 10,
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
      containers: [{
        name: "writer",
        ...env.workloadImage,
        command: ["sh", "-c", script],
        env: [{ name: "MESSAGE", value: message }],
        volumeMounts: [{ name: "s3", mountPath: "/data" }],
      }],
      volumes: [{ name: "s3", persistentVolumeClaim: { claimName: claim } }],
    },
  } as unknown as Pod;
}

/** Run the scenario; every outcome is reported through `r`. */
export async function runScenario(
  env: SandboxEnv,
  r: StepReporter,
  o: ScenarioOptions,
): Promise<void> {
  await staticVolume(env, r, o);
  await dynamicProvisioning(env, r, o);
}

/**
 * `waitFor` bounded by the scenario's `--timeout`; a timeout says what was waited for, plus what
 * `context` finds out about why (the last FailedMount event, the controller's last warning, …).
 */
async function waitStep<T>(
  what: string,
  check: () => T | Promise<T>,
  o: ScenarioOptions,
  context?: () => Promise<string | undefined>,
): Promise<Exclude<NonNullable<T>, false | "" | 0>> {
  try {
    return await waitFor(what, check, { timeoutMs: o.timeoutMs, intervalMs: 200 });
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    const why = await context?.().catch(() => undefined);
    throw new Error(
      `timed out after ${o.timeoutMs / 1000} s waiting for ${what}${why ? ` (${why})` : ""}`,
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
  env: SandboxEnv,
  uid: string,
  reasons: readonly string[],
): Promise<string | undefined> {
  const events = await env.client!.list<EventLike>(EVENTS, { namespace: env.namespace });
  const last = events.items.filter((e) =>
    e.involvedObject?.uid === uid && reasons.includes(e.reason ?? "")
  ).at(-1);
  return last ? `last ${last.reason}: ${last.message}` : undefined;
}

/** Why a pod is not done yet: its phase and its last volume event. */
async function podContext(env: SandboxEnv, name: string): Promise<string> {
  const p = await env.client!.get<Pod>(PODS, name, env.namespace);
  if (!p) return "the pod is gone";
  const ev = await lastEvent(env, p.metadata.uid, ["FailedMount", "FailedScheduling"]);
  return [`phase ${p.status?.phase ?? "none"}`, ev].filter(Boolean).join("; ");
}

/**
 * The static volume, one step after the other: a step that does not complete fails and ends this
 * part (what it would have needed is missing); the teardown still cleans up.
 */
async function staticVolume(env: SandboxEnv, r: StepReporter, o: ScenarioOptions): Promise<void> {
  const c = env.client!;
  const ns = env.namespace;
  const pvName = env.unique(SCENARIO.pv);
  const content = `hello from the s3-csi sandbox ${new Date().toISOString()}`;
  const bucket = await r.step("Bucket created in S3", async () => {
    await env.s3Client!.send(new CreateBucketCommand({ Bucket: o.bucket }));
    return o.bucket;
  }, (b) => b);
  if (!bucket) return;
  const bound = await r.step("PV and PVC bound (static provisioning)", async () => {
    env.created.push({ resource: PVS, name: pvName });
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
          volumeHandle: `${o.bucket}-volume`,
          volumeAttributes: { bucketName: o.bucket },
        },
      },
    });
    // kube-controller-manager binds a claim naming a PV it has not seen yet only at its next
    // resync (15 s): let the PV become Available first.
    await waitStep(`PV ${pvName} to be Available`, async () => {
      const pv = await c.get<PersistentVolume>(PVS, pvName);
      return pv?.status?.phase === "Available";
    }, o);
    await c.create(PVCS, {
      metadata: { name: SCENARIO.pvc, namespace: ns },
      spec: {
        accessModes: ["ReadWriteMany"],
        storageClassName: "",
        resources: { requests: { storage: "1Gi" } },
        volumeName: pvName,
      },
    });
    await waitStep(`PVC ${ns}/${SCENARIO.pvc} to be Bound`, async () => {
      const pvc = await c.get<PersistentVolumeClaim>(PVCS, SCENARIO.pvc, ns);
      return pvc?.status?.phase === "Bound";
    }, o);
    return `${SCENARIO.pvc} ⇄ ${pvName}`;
  }, (d) => d);
  if (!bound) return;
  const created = await r.step("Workload pod scheduled", async () => {
    await c.create<Pod>(
      PODS,
      writerPod(
        env,
        SCENARIO.pod,
        ns,
        SCENARIO.pvc,
        `echo "$MESSAGE" > /data/${SCENARIO.key} && cat /data/${SCENARIO.key}${
          o.keepWorkload ? " && exec sleep 86400" : ""
        }`,
        content,
      ),
    );
    return await waitStep(
      `pod ${ns}/${SCENARIO.pod} to be scheduled`,
      async () => {
        const p = await c.get<Pod>(PODS, SCENARIO.pod, ns);
        return p?.spec.nodeName ? p : undefined;
      },
      o,
      () => podContext(env, SCENARIO.pod),
    );
  }, (p) => `${ns}/${p.metadata.name} on ${p.spec.nodeName}`);
  if (!created) return;
  const uid = created.metadata.uid;

  const attached = await r.step("Controller: S3PA + Mountpoint Pod for the workload", async () => {
    let mpName = "";
    const s3pa = await waitStep(
      `a MountpointS3PodAttachment naming pod ${ns}/${SCENARIO.pod} and its Mountpoint Pod`,
      async () => {
        const list = await c.list<
          & { spec?: { mountpointS3PodAttachments?: Record<string, { workloadPodUID: string }[]> } }
          & KubeObject
        >(S3PAS);
        for (const a of list.items) {
          for (const [mp, ws] of Object.entries(a.spec?.mountpointS3PodAttachments ?? {})) {
            if (!ws.some((w) => w.workloadPodUID === uid)) continue;
            mpName = mp;
            if (await c.get(PODS, mp, env.mpNamespace)) return a.metadata?.name;
          }
        }
        return undefined;
      },
      o,
      async () => {
        if (!env.controller) return "no controller running: --without-controller";
        const why = await lastProblem(env.controller.logPath);
        return [
          mpName ? `S3PA names Mountpoint Pod ${mpName}, which does not exist` : "",
          why ? `controller: ${why}` : "",
        ].filter(Boolean).join("; ") || undefined;
      },
    );
    return `${s3pa} → Mountpoint Pod ${mpName}`;
  }, (d) => d);
  if (!attached) return;

  const done = await r.step(
    "Volume published; workload wrote and read a file through the mount",
    () =>
      waitStep(
        o.keepWorkload
          ? `pod ${ns}/${SCENARIO.pod} to run and print what it wrote`
          : `pod ${ns}/${SCENARIO.pod} to succeed`,
        async () => {
          const pod = await c.get<Pod>(PODS, SCENARIO.pod, ns);
          const phase = pod?.status?.phase;
          if (phase === "Succeeded") return pod;
          // With --keep the workload stays up (sleeping) after writing and reading.
          if (
            o.keepWorkload && phase === "Running" &&
            (await env.readLog(pod!, "writer")).includes(content)
          ) return pod;
          if (phase === "Failed") {
            const log = await env.readLog(created, "writer");
            throw new Error(`the workload failed: ${log.trim().split("\n").slice(-2).join(" | ")}`);
          }
          if (!pod) throw new Error("the workload pod is gone");
          return undefined;
        },
        o,
        () => podContext(env, SCENARIO.pod),
      ),
    () => `read back "${content.slice(0, 32)}…"`,
  );
  if (!done) return;
  const landed = await r.step("Object landed in S3", async () => {
    const log = await env.readLog(done, "writer");
    if (!log.includes(content)) throw new Error(`the workload printed ${JSON.stringify(log)}`);
    const obj = await env.s3Client!.send(
      new GetObjectCommand({ Bucket: o.bucket, Key: SCENARIO.key }),
    );
    const body = await obj.Body!.transformToString();
    if (body.trim() !== content) {
      throw new Error(`s3://${o.bucket}/${SCENARIO.key} holds ${JSON.stringify(body)}`);
    }
    return `s3://${o.bucket}/${SCENARIO.key}`;
  }, (d) => d);
  if (!landed) return;
  if (env.nodes.length > 1) {
    const read = await r.step(
      "Second node: a reader pod on node-2 reads the file through its own mount",
      async () => {
        const reader = await c.create<Pod>(PODS, {
          metadata: { name: SCENARIO.reader, namespace: ns },
          spec: {
            restartPolicy: "Never",
            // No service-account token volume (a projected volume the kubelet emulator cannot serve).
            automountServiceAccountToken: false,
            nodeSelector: { "kubernetes.io/hostname": env.nodes[1]!.name },
            securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
            containers: [{
              name: "reader",
              ...env.workloadImage,
              command: ["sh", "-c", `cat /data/${SCENARIO.key}`],
              volumeMounts: [{ name: "s3", mountPath: "/data", readOnly: true }],
            }],
            volumes: [{
              name: "s3",
              persistentVolumeClaim: { claimName: SCENARIO.pvc, readOnly: true },
            }],
          },
        } as unknown as Pod);
        const p = await waitStep(
          `pod ${ns}/${SCENARIO.reader} to finish`,
          async () => {
            const p = await c.get<Pod>(PODS, SCENARIO.reader, ns);
            const phase = p?.status?.phase;
            return phase === "Succeeded" || phase === "Failed" ? p : undefined;
          },
          o,
          () => podContext(env, SCENARIO.reader),
        );
        const log = await env.readLog(reader, "reader");
        if (p.status?.phase === "Failed" || log.trim() !== content) {
          throw new Error(`the reader on ${p.spec.nodeName} printed ${JSON.stringify(log)}`);
        }
        await c.delete(PODS, SCENARIO.reader, ns);
        return p.spec.nodeName ?? "";
      },
      (node) => `read-only mount on ${node}, same content`,
    );
    if (read === undefined) return;
  }
  if (!o.keepWorkload) await deleteWorkload(env, r, o);
}

/** The static workload's deletion and the Mountpoint Pod's release. */
async function deleteWorkload(env: SandboxEnv, r: StepReporter, o: ScenarioOptions): Promise<void> {
  const c = env.client!;
  const ns = env.namespace;
  const deleted = await r.step(
    "Workload deleted: containers stopped, NodeUnpublishVolume, pod removed",
    async () => {
      await c.delete(PODS, SCENARIO.pod, ns);
      await c.delete(PODS, SCENARIO.reader, ns).catch(() => false);
      await waitStep(
        `pods ${ns}/${SCENARIO.pod} and ${SCENARIO.reader} to be gone`,
        async () =>
          !(await c.get(PODS, SCENARIO.pod, ns)) && !(await c.get(PODS, SCENARIO.reader, ns)),
        o,
      );
      return "";
    },
  );
  if (deleted === undefined) return;
  await r.step("Mountpoint Pod released (needs-unmount → Succeeded → deleted)", async () => {
    await waitStep(
      `the Mountpoint Pods in ${env.mpNamespace} to be gone`,
      async () =>
        !(await c.list(PODS, {
          namespace: env.mpNamespace,
          labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
        })).items.length,
      o,
      async () => {
        const left = (await c.list<Pod>(PODS, {
          namespace: env.mpNamespace,
          labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
        })).items;
        return left.map((p) => `${p.metadata.name}: ${p.status?.phase ?? "?"}`).join(", ");
      },
    );
    return "";
  });
}

/**
 * Dynamic provisioning: StorageClass (default bucket mode, `deletePolicy: delete-all`) → PVC →
 * CreateVolume (a new bucket) → PV bound → a pod writes through it → the object in S3 → pod and
 * PVC deleted → DeleteVolume → PV and bucket gone. Skipped only on s3rver, which lacks bucket APIs
 * CreateVolume uses (seen in the ProvisioningFailed event, not assumed).
 */
async function dynamicProvisioning(
  env: SandboxEnv,
  r: StepReporter,
  o: ScenarioOptions,
): Promise<void> {
  const c = env.client!;
  const ns = env.namespace;
  const scName = env.unique(SCENARIO.storageClass);
  const content = `dynamically provisioned ${new Date().toISOString()}`;
  const provisioned = await r.step(
    "Dynamic provisioning: StorageClass + PVC → CreateVolume, PV bound, new bucket",
    async () => {
      if (!env.provisions) {
        throw new Error(
          env.controller
            ? "the csi-provisioner emulation did not start"
            : "no controller running (--without-controller), so no CSI Controller service to provision with",
        );
      }
      env.created.push({ resource: STORAGE_CLASSES, name: scName });
      await c.create(STORAGE_CLASSES, {
        metadata: { name: scName },
        provisioner: DRIVER_NAME,
        reclaimPolicy: "Delete",
        volumeBindingMode: "Immediate",
        mountOptions: ["allow-delete", "allow-overwrite"],
        parameters: { deletePolicy: "delete-all" },
      });
      const pvc = await c.create<PersistentVolumeClaim>(PVCS, {
        metadata: { name: SCENARIO.dynamicPvc, namespace: ns },
        spec: {
          storageClassName: scName,
          accessModes: ["ReadWriteMany"],
          resources: { requests: { storage: "1Gi" } },
        },
      });
      const bound = await waitStep(
        `PVC ${ns}/${SCENARIO.dynamicPvc} to be Bound`,
        async () => {
          const got = await c.get<PersistentVolumeClaim>(PVCS, SCENARIO.dynamicPvc, ns);
          if (got?.status?.phase === "Bound") return got;
          if (env.s3?.kind === "s3rver") {
            // The fake lacks some bucket APIs CreateVolume uses: say so instead of timing out.
            const failed = (await c.list<EventLike>(EVENTS, { namespace: ns })).items.find((e) =>
              e.reason === "ProvisioningFailed" && e.involvedObject?.uid === pvc.metadata.uid &&
              /NotImplemented/.test(e.message ?? "")
            );
            if (failed) {
              throw new SkippedError(
                `s3rver does not implement what CreateVolume needs (${
                  failed.message?.replace(/^.*NotImplemented: /, "")
                }); use RGW (root)`,
              );
            }
          }
          return undefined;
        },
        o,
        () => lastEvent(env, pvc.metadata.uid ?? "", ["ProvisioningFailed", "Provisioning"]),
      );
      const pvName = bound.spec.volumeName ?? `pvc-${pvc.metadata.uid}`;
      const pv = await c.get<PersistentVolume>(PVS, pvName);
      const bucket = pv?.spec.csi?.volumeAttributes?.bucketName;
      if (!bucket) throw new Error(`PV ${pvName} names no bucket`);
      if (!(await env.bucketExists(bucket))) throw new Error(`bucket ${bucket} does not exist`);
      return { pv: pvName, bucket };
    },
    (p) => `${SCENARIO.dynamicPvc} ⇄ ${p.pv}, bucket ${p.bucket}`,
  );
  if (!provisioned) {
    await c.delete(PVCS, SCENARIO.dynamicPvc, ns).catch(() => false);
    return;
  }
  const wrote = await r.step("Dynamic volume: a pod wrote a file through the mount", async () => {
    const pod = await c.create<Pod>(
      PODS,
      writerPod(
        env,
        SCENARIO.dynamicPod,
        ns,
        SCENARIO.dynamicPvc,
        `echo "$MESSAGE" > /data/${SCENARIO.dynamicKey}`,
        content,
      ),
    );
    const p = await waitStep(
      `pod ${ns}/${SCENARIO.dynamicPod} to succeed`,
      async () => {
        const p = await c.get<Pod>(PODS, SCENARIO.dynamicPod, ns);
        if (p?.status?.phase === "Failed") {
          const log = await env.readLog(pod, "writer");
          throw new Error(`the pod failed: ${log.trim().split("\n").slice(-2).join(" | ")}`);
        }
        return p?.status?.phase === "Succeeded" ? p : undefined;
      },
      o,
      () => podContext(env, SCENARIO.dynamicPod),
    );
    return p.spec.nodeName ?? "";
  }, (node) => `on ${node}`);
  if (wrote === undefined) return;
  const landed = await r.step("Dynamic volume: object landed in S3", async () => {
    const obj = await env.s3Client!.send(
      new GetObjectCommand({ Bucket: provisioned.bucket, Key: SCENARIO.dynamicKey }),
    );
    const body = (await obj.Body!.transformToString()).trim();
    if (body !== content) throw new Error(`the object holds ${JSON.stringify(body)}`);
    return `s3://${provisioned.bucket}/${SCENARIO.dynamicKey}`;
  }, (d) => d);
  if (landed === undefined) return;
  await r.step(
    "Dynamic volume: pod and PVC deleted → DeleteVolume, PV and bucket gone (delete-all)",
    async () => {
      await c.delete(PODS, SCENARIO.dynamicPod, ns).catch(() => false);
      await waitStep(
        `pod ${ns}/${SCENARIO.dynamicPod} to be gone`,
        async () => !(await c.get(PODS, SCENARIO.dynamicPod, ns)),
        o,
      );
      await c.delete(PVCS, SCENARIO.dynamicPvc, ns);
      await waitStep(
        `PV ${provisioned.pv} to be gone`,
        async () => !(await c.get(PVS, provisioned.pv)),
        o,
      );
      await waitStep(
        `bucket ${provisioned.bucket} to be gone`,
        async () => !(await env.bucketExists(provisioned.bucket)),
        o,
      );
      return `${provisioned.pv}, ${provisioned.bucket}`;
    },
    (d) => d,
  );
  await c.delete(STORAGE_CLASSES, scName).catch(() => false);
}

/** The last warning or error line of a process log, shortened. */
async function lastProblem(path: string | undefined): Promise<string | undefined> {
  if (!path) return undefined;
  const text = await Deno.readTextFile(path).catch(() => "");
  const line = text.trim().split("\n").findLast((l) =>
    /\[(WRN|ERR|FTL)\]|"level":"(WARN|ERROR|FATAL)/i.test(l)
  );
  return line?.replace(/^.*?\[(WRN|ERR|FTL)\]\s*/, "").slice(0, 240);
}
