/**
 * The sandbox's end-to-end scenario: a bucket, a static PV/PVC, a workload Pod that writes and reads
 * a file through the mount, the object checked in S3, then the workload deleted. Steps whose
 * component has not landed yet are reported as pending — detected from what the running parts do
 * (an `Unimplemented` CSI error in the pod's FailedMount event, no attachment from the controller),
 * never hard-coded.
 *
 * @module
 */
import { CreateBucketCommand, GetObjectCommand } from "@aws-sdk/client-s3";
import type { KubeObject } from "../kube/client.ts";
import { EVENTS, PODS, PVCS, PVS, S3PAS } from "../kube/resources.ts";
import type { Pod } from "../kubelet/k8s_types.ts";
import {
  COMPONENT_MOUNTPOINT_POD,
  DEFAULT_MOUNTPOINT_NAMESPACE,
  LABEL_COMPONENT,
} from "../mppod/labels.ts";
import { DRIVER_NAME } from "../util/version.ts";
import type { SandboxEnv } from "./sandbox_env.ts";
import { PendingError, type StepReporter } from "./step_reporter.ts";

/** Names used by the scenario. */
export const SCENARIO = {
  namespace: "default",
  pv: "sandbox-pv",
  pvc: "sandbox-pvc",
  pod: "sandbox-writer",
  reader: "sandbox-reader",
  key: "hello.txt",
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

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Run the scenario; every outcome is reported through `r`. */
export async function runScenario(
  env: SandboxEnv,
  r: StepReporter,
  o: ScenarioOptions,
): Promise<void> {
  const c = env.client!;
  const ns = SCENARIO.namespace;
  const content = `hello from the s3-csi sandbox ${new Date().toISOString()}`;
  const bucket = await r.step("Bucket created in S3", async () => {
    await env.s3Client!.send(new CreateBucketCommand({ Bucket: o.bucket }));
    return o.bucket;
  }, (b) => b);
  if (!bucket) return;
  const bound = await r.step("PV and PVC bound (static provisioning)", async () => {
    await c.create(PVS, {
      metadata: { name: SCENARIO.pv },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteMany"],
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: "",
        mountOptions: ["allow-delete"],
        csi: {
          driver: DRIVER_NAME,
          volumeHandle: `${o.bucket}-volume`,
          volumeAttributes: { bucketName: o.bucket },
        },
      },
    });
    await c.create(PVCS, {
      metadata: { name: SCENARIO.pvc, namespace: ns },
      spec: {
        accessModes: ["ReadWriteMany"],
        storageClassName: "",
        resources: { requests: { storage: "1Gi" } },
        volumeName: SCENARIO.pv,
      },
    });
    for (let i = 0; i < 100; i++) {
      const pvc = await c.get<{ status?: { phase?: string } } & KubeObject>(PVCS, SCENARIO.pvc, ns);
      if (pvc?.status?.phase === "Bound") return `${SCENARIO.pvc} ⇄ ${SCENARIO.pv}`;
      await sleep(100);
    }
    throw new Error("PVC not Bound within 10 s");
  }, (d) => d);
  if (!bound) return;
  const created = await r.step("Workload pod scheduled", async () => {
    const pod = await c.create<Pod>(PODS, {
      metadata: { name: SCENARIO.pod, namespace: ns },
      spec: {
        restartPolicy: "Never",
        terminationGracePeriodSeconds: 10,
        securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
        containers: [{
          name: "writer",
          image: "busybox",
          command: [
            "sh",
            "-c",
            `echo "$MESSAGE" > /data/${SCENARIO.key} && cat /data/${SCENARIO.key}${
              o.keepWorkload ? " && exec sleep 86400" : ""
            }`,
          ],
          env: [{ name: "MESSAGE", value: content }],
          volumeMounts: [{ name: "s3", mountPath: "/data" }],
        }],
        volumes: [{ name: "s3", persistentVolumeClaim: { claimName: SCENARIO.pvc } }],
      },
    } as unknown as Pod);
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
        (await readLog(env, pod!, "writer")).includes(content)
      ) return pod!;
      if (phase === "Failed") {
        const log = await readLog(env, created, "writer");
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
    const log = await readLog(env, done, "writer");
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
            nodeSelector: { "kubernetes.io/hostname": env.nodes[1]!.name },
            securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
            containers: [{
              name: "reader",
              image: "busybox",
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
            const log = await readLog(env, reader, "reader");
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
  if (o.keepWorkload) return;
  await r.step(
    "Workload deleted: containers stopped, NodeUnpublishVolume, pod removed",
    async () => {
      await c.delete(PODS, SCENARIO.pod, ns);
      // Without a mount the pod waits for the in-flight publish: do not wait long for it.
      const tries = !done && attached === undefined ? 50 : 300;
      for (let i = 0; i < tries; i++) {
        if (!(await c.get(PODS, SCENARIO.pod, ns))) return "";
        await sleep(100);
      }
      if (!done && attached === undefined) {
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
        namespace: DEFAULT_MOUNTPOINT_NAMESPACE,
        labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
      });
      if (!mps.items.length) return "";
      await sleep(100);
    }
    throw new Error("Mountpoint Pods remain after 30 s");
  });
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

async function readLog(env: SandboxEnv, pod: Pod, container: string): Promise<string> {
  for (const n of env.nodes) {
    const path = n.kubelet.containerLogPath(pod.metadata.uid, container) ??
      `${n.root}/pod-logs/${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}/${container}/0.log`;
    const text = await Deno.readTextFile(path).catch(() => undefined);
    if (text !== undefined) return text;
  }
  return "";
}
