/**
 * Controller scale benchmark: N workload pods over M nodes and P PVs created at once against the
 * API emulator (or a real API server given by `--kubeconfig`); the controller runs as a real
 * process. Prints a table:
 * - time from the first pod create until every workload is in an attachment;
 * - API writes per attachment (resourceVersion delta while only the controller writes) next to the
 *   minimum (2 for a new Mountpoint Pod: pod + S3PA; 1 for a shared one: S3PA update);
 * - controller RSS (current and peak).
 *
 * Usage: `deno task bench:controller [--pods 2000] [--nodes 50] [--pvs 200] [--kubeconfig F]`
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { MountpointS3PodAttachment } from "../src/api/mountpoint_s3_pod_attachment.ts";
import { s3paCrd } from "../src/api/mountpoint_s3_pod_attachment.ts";
import { CRDS, NAMESPACES, PODS, PRIORITY_CLASSES, PVCS, PVS } from "../src/kube/resources.ts";
import { S3PAS } from "../src/api/mountpoint_s3_pod_attachment.ts";
import { RestKubeClient } from "../src/kube/rest_client.ts";
import { kubeConfigFromFile } from "../src/kube/kube_config.ts";
import { fromFileUrl } from "./_gen_util.ts";
import { V8_FLAGS } from "./build.ts";
import { waitFor } from "../src/util/wait_for.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));
const note = (s: string) => Deno.stderr.writeSync(new TextEncoder().encode(`${s}\n`));

const { values } = parseArgs({
  args: Deno.args,
  options: {
    pods: { type: "string", default: "2000" },
    nodes: { type: "string", default: "50" },
    pvs: { type: "string", default: "200" },
    kubeconfig: { type: "string" },
    concurrency: { type: "string", default: "64" },
    "v8-flags": { type: "string", default: V8_FLAGS.controller },
  },
});
const PODS_N = Number(values.pods);
const NODES_N = Number(values.nodes);
const PVS_N = Number(values.pvs);

async function pool<T>(items: T[], n: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

function rss(pid: number): { rssMb: number; peakMb: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: kb("VmRSS") / 1024, peakMb: kb("VmHWM") / 1024 };
}

// 1. API server.
let kubeconfig = values.kubeconfig;
let apiserver: Deno.ChildProcess | undefined;
const tmp = await Deno.makeTempDir({ prefix: "s3csi-bench-" });
if (!kubeconfig) {
  kubeconfig = `${tmp}/kubeconfig`;
  apiserver = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}tests/testbed/cmd/apiserver/main.ts`,
      "--port",
      "0",
      "--insecure",
      "--kubeconfig-out",
      kubeconfig,
      "--log-level",
      "warning",
    ],
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  await waitFor(
    "the emulator",
    async () => (await Deno.stat(kubeconfig!).catch(() => undefined)) !== undefined,
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}
const client = new RestKubeClient(kubeConfigFromFile(kubeconfig));
const run = crypto.randomUUID().slice(0, 6);
const ns = `bench-${run}`;
const mpNs = `bench-mp-${run}`;

// 2. Fixtures: CRD, namespaces, PVs and bound PVCs.
if (!(await client.get(CRDS, "mountpoints3podattachments.s3.csi.scality.com"))) {
  await client.create(CRDS, s3paCrd() as never);
}
for (const n of [ns, mpNs]) await client.create(NAMESPACES, { metadata: { name: n } });
// The PriorityClass of Mountpoint Pods, as the deployment creates it (Priority admission).
await client.create(
  PRIORITY_CLASSES,
  { metadata: { name: "mount-s3-critical" }, value: 1_000_000_000 } as never,
).catch(
  () => {},
);
const pvIndexes = Array.from({ length: PVS_N }, (_, i) => i);
await pool(pvIndexes, 32, async (i) => {
  const pv = `bench-${run}-pv-${i}`;
  await client.create(PVS, {
    metadata: { name: pv },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteMany"],
      csi: {
        driver: "s3.csi.scality.com",
        volumeHandle: pv,
        volumeAttributes: { bucketName: "bench" },
      },
      claimRef: { name: `claim-${i}`, namespace: ns },
      storageClassName: "",
    },
  });
  await client.create(PVCS, {
    metadata: { name: `claim-${i}`, namespace: ns },
    spec: {
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "",
      volumeName: pv,
    },
  });
  await client.patch(PVCS, `claim-${i}`, ns, { status: { phase: "Bound" } }, {
    subresource: "status",
  });
});

// Pod i uses PV i % P on one of 5 nodes per PV, so about half the attachments share a pod.
const placement = Array.from({ length: PODS_N }, (_, i) => {
  const p = i % PVS_N;
  const k = Math.floor(i / PVS_N);
  return { i, pv: p, node: (p + (k % 5) * 10) % NODES_N };
});
const keys = new Set(placement.map((x) => `${x.pv}/${x.node}`));
const minimumWrites = keys.size * 2 + (PODS_N - keys.size);

// 3. Controller, synced and idle.
const controller = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "-A",
    ...(values["v8-flags"] ? [`--v8-flags=${values["v8-flags"]}`] : []),
    `${ROOT}src/cmd/controller/main.ts`,
    "--mountpoint-namespace",
    mpNs,
    "--leader-elect=false",
    "--metrics-address",
    "127.0.0.1:0",
    "--log-level",
    "warning",
  ],
  env: { KUBECONFIG: kubeconfig },
  stdout: "null",
  stderr: "inherit",
}).spawn();
await new Promise((r) => setTimeout(r, 3000));
const idle = rss(controller.pid);
const rvBefore = (await client.list(S3PAS, { limit: 1 })).resourceVersion;

// 4. All pods at once.
const started = performance.now();
await pool(placement, Number(values.concurrency), async ({ i, pv, node }) => {
  await client.create(PODS, {
    metadata: { name: `w-${i}`, namespace: ns },
    spec: {
      nodeName: `node-${node}`,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: `claim-${pv}` } }],
    },
  });
});
const createdMs = performance.now() - started;
let peakDuring = idle.peakMb;
async function countAttached() {
  peakDuring = Math.max(peakDuring, rss(controller.pid).peakMb);
  const list = await client.list<MountpointS3PodAttachment>(S3PAS);
  const mine = list.items.filter((a) => a.spec.persistentVolumeName.startsWith(`bench-${run}-`));
  const n = mine.reduce(
    (s, a) => s + Object.values(a.spec.mountpointS3PodAttachments).flat().length,
    0,
  );
  return n >= PODS_N && { attachments: mine.length, workloads: n, rv: list.resourceVersion };
}
const attached = await waitFor(
  "every workload attached",
  // A list can fail while the API server is busy: try again at the next poll.
  () => countAttached().catch(() => undefined),
  { timeoutMs: 600_000, intervalMs: 200 },
);
const doneMs = performance.now() - started;
await new Promise((r) => setTimeout(r, 2000));
const rvAfter = (await client.list(S3PAS, { limit: 1 })).resourceVersion;
const after = rss(controller.pid);
const mpPods = (await client.list(PODS, { namespace: mpNs })).items.length;
// Pod creates by the benchmark account for PODS_N resourceVersions.
const controllerWrites = Number(rvAfter) - Number(rvBefore) - PODS_N;

controller.kill("SIGTERM");
await controller.status;
apiserver?.kill("SIGTERM");
await apiserver?.status;
await Deno.remove(tmp, { recursive: true }).catch(() => {});

out(
  `\nController scale (${PODS_N} pods, ${NODES_N} nodes, ${PVS_N} PVs; ${
    values.kubeconfig ? "given API server" : "API emulator"
  }; ${new Date().toISOString()})`,
);
out(`| figure | value | goal |`);
out(`|---|---|---|`);
out(`| pods created by the benchmark in | ${(createdMs / 1000).toFixed(1)} s | |`);
out(`| time until every workload is attached | ${(doneMs / 1000).toFixed(1)} s | ≤ 20 s |`);
out(
  `| S3PAs / Mountpoint Pods | ${attached.attachments} / ${mpPods} | ${keys.size} / ${keys.size} |`,
);
out(`| API writes by the controller | ${controllerWrites} | minimum ${minimumWrites} |`);
out(
  `| writes per attachment | ${(controllerWrites / PODS_N).toFixed(3)} | minimum ${
    (minimumWrites / PODS_N).toFixed(3)
  } |`,
);
out(
  `| controller RSS idle / after / peak | ${idle.rssMb.toFixed(0)} / ${after.rssMb.toFixed(0)} / ${
    Math.max(peakDuring, after.peakMb).toFixed(0)
  } MB | ≤ 150 MB |`,
);
note("done");
