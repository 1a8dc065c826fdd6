/**
 * The sandbox's end-to-end scenario: a bucket, a static PV/PVC, a workload Pod that writes and reads
 * a file through the mount, the object checked in S3, then the workload deleted; then dynamic
 * provisioning: a StorageClass of the driver, a PVC (→ CreateVolume, a new bucket), a pod writing
 * through it, the object checked in S3, the PVC deleted (→ DeleteVolume, bucket gone). Steps whose
 * component has not landed yet are reported as pending — detected from what the running parts do
 * (an `Unimplemented` CSI error in the pod's FailedMount event, no attachment from the controller),
 * never hard-coded.
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
import { PendingError, SkippedError, type StepReporter } from "./step_reporter.ts";
import { sleep } from "../../../src/util/sleep.ts";
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
  /** Longest wait for the workload to finish. */
  readonly mountTimeoutMs: number;
  /** Longest wait for the controller's attachment. */
  readonly controllerTimeoutMs: number;
  /** Leave the workload in place (`--keep`). */
  readonly keepWorkload: boolean;
}

/** Run the scenario; every outcome is reported through `r`. */

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

export async function runScenario(
  env: SandboxEnv,
  r: StepReporter,
  o: ScenarioOptions,
): Promise<void> {
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
    await waitFor("the PV to be Available", async () => {
      const pv = await c.get<PersistentVolume>(PVS, pvName);
      return pv?.status?.phase === "Available";
    }, { timeoutMs: 45_000, intervalMs: 200 });
    await c.create(PVCS, {
      metadata: { name: SCENARIO.pvc, namespace: ns },
      spec: {
        accessModes: ["ReadWriteMany"],
        storageClassName: "",
        resources: { requests: { storage: "1Gi" } },
        volumeName: pvName,
      },
    });
    await waitFor("the PVC to be Bound", async () => {
      const pvc = await c.get<PersistentVolumeClaim>(PVCS, SCENARIO.pvc, ns);
      return pvc?.status?.phase === "Bound";
    }, { timeoutMs: 45_000, intervalMs: 200 });
    return `${SCENARIO.pvc} ⇄ ${pvName}`;
  }, (d) => d);
  if (!bound) return;
  const created = await r.step("Workload pod scheduled", async () => {
    const pod = await c.create<Pod>(
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
    for (let i = 0; i < 100; i++) {
      const p = await c.get<Pod>(PODS, SCENARIO.pod, ns);
      if (p?.spec.nodeName) return p;
      await sleep(100);
    }
    throw new Error(`pod ${pod.metadata.name} not scheduled within 10 s`);
  }, (p) => `${ns}/${p.metadata.name} on ${p.spec.nodeName}`);
  if (!created) return;
  const uid = created.metadata.uid;

  const controller = (async () => {
    const deadline = Date.now() + o.controllerTimeoutMs;
    while (Date.now() < deadline) {
      const list = await c.list<
        & { spec?: { mountpointS3PodAttachments?: Record<string, { workloadPodUID: string }[]> } }
        & KubeObject
      >(S3PAS);
      for (const s3pa of list.items) {
        for (const [mp, ws] of Object.entries(s3pa.spec?.mountpointS3PodAttachments ?? {})) {
          if (ws.some((w) => w.workloadPodUID === uid)) {
            return `${s3pa.metadata?.name} → Mountpoint Pod ${mp}`;
          }
        }
      }
      await sleep(250);
    }
    const why = await lastProblem(env.controller?.logPath);
    throw new PendingError(
      5,
      `no MountpointS3PodAttachment for the workload within ${o.controllerTimeoutMs / 1000} s${
        why ? ` (controller: ${why})` : " (pod reconciler not there yet)"
      }`,
    );
  })();
  let mountWatch = true;
  const mounted = (async () => {
    const deadline = Date.now() + o.mountTimeoutMs;
    while (Date.now() < deadline && mountWatch) {
      const pod = await c.get<Pod>(PODS, SCENARIO.pod, ns);
      const phase = pod?.status?.phase;
      if (phase === "Succeeded") return pod!;
      // With --keep the workload stays up (sleeping) after writing and reading.
      if (
        o.keepWorkload && phase === "Running" &&
        (await env.readLog(pod!, "writer")).includes(content)
      ) return pod!;
      if (phase === "Failed") {
        const log = await env.readLog(created, "writer");
        throw new Error(`the workload failed: ${log.trim().split("\n").slice(-2).join(" | ")}`);
      }
      const events = await c.list<
        { reason?: string; message?: string; involvedObject?: { uid?: string } } & KubeObject
      >(EVENTS, { namespace: ns });
      const failed = events.items.filter((e) =>
        e.reason === "FailedMount" && e.involvedObject?.uid === uid
      );
      const unimplemented = failed.find((e) => /code = Unimplemented/.test(e.message ?? ""));
      if (unimplemented) {
        throw new PendingError(
          6,
          `the node plugin answers ${unimplemented.message?.replace(/^.* : /, "")}`,
        );
      }
      await sleep(300);
    }
    const last = (await c.list<
      { reason?: string; message?: string; involvedObject?: { uid?: string } } & KubeObject
    >(EVENTS, { namespace: ns })).items
      .filter((e) => e.reason === "FailedMount" && e.involvedObject?.uid === uid).at(-1);
    throw new Error(
      `the workload did not finish within ${o.mountTimeoutMs / 1000} s${
        last ? ` (last FailedMount: ${last.message})` : ""
      }`,
    );
  })();
  mounted.catch(() => {}); // awaited below, possibly after a cut-off
  const attached = await r.step(
    "Controller: S3PA + Mountpoint Pod for the workload",
    () => controller,
    (d) => d,
  );
  const done = await r.step(
    "Volume published; workload wrote and read a file through the mount",
    async () => {
      try {
        if (attached !== undefined) return await mounted;
        // Without an attachment the node plugin cannot mount: a short grace, no more.
        let timer: ReturnType<typeof setTimeout> | undefined;
        const cut = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error("no mount 10 s after the controller step")),
            10_000,
          );
        });
        try {
          return await Promise.race([mounted, cut]);
        } finally {
          clearTimeout(timer);
          mountWatch = false;
        }
      } catch (err) {
        if (!(err instanceof PendingError) && attached === undefined) {
          throw new PendingError(
            5,
            `no mount without the controller (${err instanceof Error ? err.message : err})`,
          );
        }
        throw err;
      }
    },
    () => `read back "${content.slice(0, 32)}…"`,
  );
  await r.step("Object landed in S3", async () => {
    if (!done) throw new PendingError(6, "nothing was written through a mount");
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
  if (env.nodes.length > 1 && done) {
    await r.step(
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
        const deadline = Date.now() + o.mountTimeoutMs;
        while (Date.now() < deadline) {
          const p = await c.get<Pod>(PODS, SCENARIO.reader, ns);
          if (p?.status?.phase === "Succeeded" || p?.status?.phase === "Failed") {
            const log = await env.readLog(reader, "reader");
            if (p.status.phase === "Failed" || log.trim() !== content) {
              throw new Error(`the reader on ${p.spec.nodeName} printed ${JSON.stringify(log)}`);
            }
            await c.delete(PODS, SCENARIO.reader, ns);
            return p.spec.nodeName ?? "";
          }
          await sleep(200);
        }
        throw new Error(`the reader did not finish within ${o.mountTimeoutMs / 1000} s`);
      },
      (node) => `read-only mount on ${node}, same content`,
    );
  }
  if (!o.keepWorkload) await deleteWorkload(env, r, { done: !!done, attached: !!attached });
  await dynamicProvisioning(env, r, o);
}

/** The static workload's deletion and the Mountpoint Pod's release. */
async function deleteWorkload(
  env: SandboxEnv,
  r: StepReporter,
  { done, attached }: { done: boolean; attached: boolean },
): Promise<void> {
  const c = env.client!;
  const ns = env.namespace;
  await r.step(
    "Workload deleted: containers stopped, NodeUnpublishVolume, pod removed",
    async () => {
      await c.delete(PODS, SCENARIO.pod, ns);
      // Without a mount the pod waits for the in-flight publish: do not wait long for it.
      const tries = !done && !attached ? 50 : 300;
      for (let i = 0; i < tries; i++) {
        if (!(await c.get(PODS, SCENARIO.pod, ns))) return "";
        await sleep(100);
      }
      if (!done && !attached) {
        throw new PendingError(
          5,
          "the pod is still Terminating after 5 s: kubelet unpublishes only after the in-flight NodePublishVolume returns, and the node plugin waits for a Mountpoint Pod",
        );
      }
      throw new Error("the pod is still there after 30 s");
    },
  );
  await r.step("Mountpoint Pod released (needs-unmount → Succeeded → deleted)", async () => {
    if (!attached) throw new PendingError(5, "no Mountpoint Pod was created");
    for (let i = 0; i < 300; i++) {
      const mps = await c.list(PODS, {
        namespace: env.mpNamespace,
        labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
      });
      if (!mps.items.length) return "";
      await sleep(100);
    }
    throw new Error("Mountpoint Pods remain after 30 s");
  });
}

/**
 * Dynamic provisioning: StorageClass (default bucket mode, `deletePolicy: delete-all`) → PVC →
 * CreateVolume (a new bucket) → PV bound → a pod writes through it → the object in S3 → pod and
 * PVC deleted → DeleteVolume → PV and bucket gone. Pending (issue #7) without a csi-provisioner.
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
        throw new PendingError(
          7,
          env.controller
            ? "the csi-provisioner emulation did not start"
            : "no controller, so no CSI Controller service to provision with",
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
      await waitFor("the PVC to be Bound", async () => {
        const got = await c.get<PersistentVolumeClaim>(PVCS, SCENARIO.dynamicPvc, ns);
        if (got?.status?.phase === "Bound") return true;
        if (env.s3?.kind === "s3rver") {
          // The fake lacks some bucket APIs CreateVolume uses: say so instead of timing out.
          const failed = (await c.list<
            { reason?: string; message?: string; involvedObject?: { uid?: string } } & KubeObject
          >(EVENTS, { namespace: ns })).items.find((e) =>
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
        return false;
      }, { timeoutMs: 60_000, intervalMs: 200 });
      const bound = (await c.get<PersistentVolumeClaim>(PVCS, SCENARIO.dynamicPvc, ns))!;
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
    let node = "";
    await waitFor("the pod to succeed", async () => {
      const p = await c.get<Pod>(PODS, SCENARIO.dynamicPod, ns);
      if (p?.status?.phase === "Failed") {
        const log = await env.readLog(pod, "writer");
        throw new Error(`the pod failed: ${log.trim().split("\n").slice(-2).join(" | ")}`);
      }
      node = p?.spec.nodeName ?? "";
      return p?.status?.phase === "Succeeded";
    }, { timeoutMs: o.mountTimeoutMs, intervalMs: 200 });
    return node;
  }, (node) => `on ${node}`);
  await r.step("Dynamic volume: object landed in S3", async () => {
    if (wrote === undefined) throw new Error("nothing was written");
    const obj = await env.s3Client!.send(
      new GetObjectCommand({ Bucket: provisioned.bucket, Key: SCENARIO.dynamicKey }),
    );
    const body = (await obj.Body!.transformToString()).trim();
    if (body !== content) throw new Error(`the object holds ${JSON.stringify(body)}`);
    return `s3://${provisioned.bucket}/${SCENARIO.dynamicKey}`;
  }, (d) => d);
  await r.step(
    "Dynamic volume: pod and PVC deleted → DeleteVolume, PV and bucket gone (delete-all)",
    async () => {
      await c.delete(PODS, SCENARIO.dynamicPod, ns).catch(() => false);
      await waitFor(
        "the pod to go",
        async () => !(await c.get(PODS, SCENARIO.dynamicPod, ns)),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      await c.delete(PVCS, SCENARIO.dynamicPvc, ns);
      await waitFor("the PV to go", async () => !(await c.get(PVS, provisioned.pv)), {
        timeoutMs: 60_000,
        intervalMs: 200,
      });
      await waitFor(
        `bucket ${provisioned.bucket} to go`,
        async () => !(await env.bucketExists(provisioned.bucket)),
        { timeoutMs: 10_000, intervalMs: 200 },
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
