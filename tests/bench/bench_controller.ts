/**
 * Controller scale benchmark: N workload pods over M nodes and P PVs created at once; the
 * controller runs as a real process started as its image starts it: `deno task build`'s
 * `dist/controller.js` with `--no-config --no-lock --no-remote --no-code-cache`, the production V8
 * flags and no cache dir Deno can write (`--source` runs src/cmd/controller/main.ts instead).
 * Scales:
 *
 * - `emulator-2k`: 2,000 pods / 50 nodes / 200 PVs on the API emulator;
 * - `real-2k`: the same on a real kube-apiserver (with etcd and kube-controller-manager), started
 *   fresh by `tests/testbed/services/kube_real/start.sh` under its own state dir and ports;
 * - `real-10k`: 10,000 pods / 250 nodes / 1,000 PVs on a fresh real kube-apiserver.
 *
 * Reported per scale: time from the first pod create until every workload is in an attachment
 * (seen through a watch, not polled), API writes of the controller (its own request counters, on
 * /metrics) next to the minimum of one write per workload (2 for a new Mountpoint Pod: pod +
 * attachment; 1 for a shared one: attachment update) — workloads waiting together for the same
 * attachment join one write, so fewer is possible —, the controller's RSS (idle, after, peak =
 * VmHWM), and the growth from 2k to 10k on the real tier.
 *
 * Usage: `deno task bench:controller [--only emulator-2k,real-2k,real-10k] [--kubeconfig F]
 * [--v8-flags F] [--glibc-tunables T] [--controller-args "--workers=16 …"] [--no-build]`
 * (`--kubeconfig` runs the chosen scales against that server instead of starting one; `--v8-flags`
 * replaces the controller's production flags from scripts/build.ts and `--glibc-tunables` its
 * image's malloc settings (`GLIBC_TUNABLES`, empty: glibc's defaults); `--controller-args` adds
 * controller flags; `--no-build` measures dist/controller.js as it is, for experiments on the
 * artefact).
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { MountpointS3PodAttachment } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { s3paCrd, S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { Informer } from "../../src/kube/informer.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import {
  CRDS,
  NAMESPACES,
  NODES,
  PODS,
  PRIORITY_CLASSES,
  PVCS,
  PVS,
  SERVICE_ACCOUNTS,
} from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import type { PersistentVolumeClaim } from "../../src/kube/types.ts";
import { fromFileUrl } from "../../scripts/_gen_util.ts";
import { unsettledClaims } from "./bench_claims.ts";
import { imageEnv, V8_FLAGS } from "../../scripts/build.ts";
import { preboundClaim, preboundPv } from "../testbed/control_plane/prebound_volume.ts";

const ROOT = fromFileUrl(new URL("../../", import.meta.url));
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));
const note = (s: string) => Deno.stderr.writeSync(new TextEncoder().encode(`bench: ${s}\n`));

/** One scale of the benchmark. */
interface Scale {
  readonly name: string;
  readonly pods: number;
  readonly nodes: number;
  readonly pvs: number;
  readonly tier: "emulator" | "real";
}

const SCALES: readonly Scale[] = [
  { name: "emulator-2k", pods: 2000, nodes: 50, pvs: 200, tier: "emulator" },
  { name: "real-2k", pods: 2000, nodes: 50, pvs: 200, tier: "real" },
  { name: "real-10k", pods: 10_000, nodes: 250, pvs: 1000, tier: "real" },
];

/** What one scale measured. */
interface Result {
  readonly scale: Scale;
  readonly server: string;
  readonly createdS: number;
  readonly attachedS: number;
  readonly attachments: number;
  readonly mountpointPods: number;
  readonly keys: number;
  readonly writes: number;
  readonly minimumWrites: number;
  readonly idleMb: number;
  readonly afterMb: number;
  readonly peakMb: number;
}

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

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs: number,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function loadAverage(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

const loadBefore = loadAverage();

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Writes the controller sent (its request counters on /metrics). */
async function controllerWrites(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^s3csi_controller_api_requests_total\{verb="(\w+)"\} (\d+)/gm)) {
    if (["POST", "PUT", "PATCH", "DELETE"].includes(m[1]!)) n += Number(m[2]);
  }
  return n;
}

/** A server to run one scale against, and how to let it go. */
interface Target {
  readonly kubeconfig: string;
  readonly server: string;
  close(): Promise<void>;
}

async function emulatorTarget(): Promise<Target> {
  const tmp = await Deno.makeTempDir({ prefix: "s3csi-bench-" });
  const kubeconfig = `${tmp}/kubeconfig`;
  const child = new Deno.Command(Deno.execPath(), {
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
    cwd: ROOT,
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  await until(
    "the emulator",
    async () => (await Deno.stat(kubeconfig).catch(() => false)) && true,
    30_000,
  );
  return {
    kubeconfig,
    server: "API emulator",
    async close() {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    },
  };
}

/** Environment of the benchmark's own real control plane (never the shared test one). */
const REAL_ENV = {
  KUBE_REAL_STATE: "/var/tmp/s3csi-kube-real-bench",
  KUBE_REAL_APISERVER_PORT: "27643",
  KUBE_REAL_ETCD_PORT: "24390",
  KUBE_REAL_ETCD_PEER_PORT: "24400",
  KUBE_REAL_KCM_PORT: "27457",
};

class SkipError extends Error {}

async function realTarget(): Promise<Target> {
  const script = (name: string, args: string[] = []) =>
    new Deno.Command("bash", {
      args: [`${ROOT}tests/testbed/services/kube_real/${name}`, ...args],
      env: REAL_ENV,
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
  // A fresh, empty cluster for each scale (nothing left from the previous one in the caches).
  await script("stop.sh", ["--purge"]);
  note("starting a fresh real control plane (etcd, kube-apiserver, kube-controller-manager)");
  const r = await script("start.sh");
  const stderr = new TextDecoder().decode(r.stderr).trim().split("\n").slice(-3).join(" | ");
  if (r.code === 3) throw new SkipError(`real tier cannot run here: ${stderr}`);
  if (r.code !== 0) throw new Error(`kube_real start.sh failed (${r.code}): ${stderr}`);
  const kubeconfig = new TextDecoder().decode(r.stdout).trim();
  return {
    kubeconfig,
    server: "real kube-apiserver v1.32 + etcd 3.5",
    async close() {
      await script("stop.sh", ["--purge"]);
    },
  };
}

async function runScale(
  scale: Scale,
  target: Target,
  v8Flags: string,
  extraArgs: readonly string[],
  source = false,
  glibcTunables = "",
): Promise<Result> {
  const client = new RestKubeClient(kubeConfigFromFile(target.kubeconfig), {
    userAgent: "s3csi-bench",
  });
  const run = crypto.randomUUID().slice(0, 6);
  const ns = `bench-${run}`;
  const mpNs = `bench-mp-${run}`;
  const prefix = `bench-${run}-pv-`;
  note(`${scale.name}: fixtures (${scale.pvs} PVs and claims)`);
  if (!(await client.get(CRDS, "mountpoints3podattachments.s3.csi.scality.com"))) {
    await client.create(CRDS, s3paCrd() as never);
  }
  await until(
    "the CRD to be served",
    async () => {
      await client.list(S3PAS, { limit: 1 });
      return true;
    },
    60_000,
    200,
  );
  for (const n of [ns, mpNs]) await client.create(NAMESPACES, { metadata: { name: n } });
  // The workloads' nodes exist, as in a cluster: the controller makes each Mountpoint Pod owned by
  // its Node (read from its Node informer).
  await pool(Array.from({ length: scale.nodes }, (_, i) => i), 32, async (i) => {
    await client.create(NODES, { metadata: { name: `node-${i}` } }).catch(() => {});
  });
  if (scale.tier === "real") {
    for (const n of [ns, mpNs]) {
      await until(
        `serviceaccount ${n}/default`,
        () => client.get(SERVICE_ACCOUNTS, "default", n),
        60_000,
        200,
      );
    }
  }
  await client.create(
    PRIORITY_CLASSES,
    { metadata: { name: "mount-s3-critical" }, value: 1_000_000_000 } as never,
  ).catch(() => {});
  // Every PV exists before any claim names it: kube-controller-manager's PV binder (real tier)
  // then finds the volume of each claim on its first pass instead of resetting the claim to Pending.
  await pool(Array.from({ length: scale.pvs }, (_, i) => i), 32, async (i) => {
    const pv = `${prefix}${i}`;
    await client.create(
      PVS,
      preboundPv(pv, { name: `claim-${i}`, namespace: ns }, { bucket: "bench" }),
    );
  });
  await pool(Array.from({ length: scale.pvs }, (_, i) => i), 32, async (i) => {
    const pv = `${prefix}${i}`;
    await client.create(PVCS, preboundClaim(`claim-${i}`, ns, pv));
    // The emulator has no PV binder: mark the claim Bound as the binder would. On the real tier
    // kube-controller-manager's binder does it (a status written here would race it).
    if (scale.tier === "emulator") {
      await client.patch(PVCS, `claim-${i}`, ns, { status: { phase: "Bound" } }, {
        subresource: "status",
      });
    }
  });
  if (scale.tier === "real") {
    const waiting = performance.now();
    // The PV binder of kube-controller-manager finishes each binding itself and, until it has, may
    // set a claim back to Pending (seen: claims Pending again for up to 55 s, until its periodic
    // resync): the controller rightly waits for Bound, which would put the binder's latency into
    // the measured time. Fixtures are ready once the binder has completed every claim.
    await until(
      "kube-controller-manager to complete the claims' bindings",
      async () => {
        const claims = (await client.list<PersistentVolumeClaim>(PVCS, { namespace: ns })).items;
        return claims.length === scale.pvs && unsettledClaims(claims).length === 0;
      },
      Math.max(180_000, scale.pvs * 500),
      500,
    );
    note(
      `${scale.name}: claims bound by the PV binder after ${
        ((performance.now() - waiting) / 1000).toFixed(1)
      } s`,
    );
  }

  // Pod i uses PV i % P on one of 5 nodes per PV, so about half the attachments share a pod.
  const placement = Array.from({ length: scale.pods }, (_, i) => {
    const p = i % scale.pvs;
    const k = Math.floor(i / scale.pvs);
    return { i, pv: p, node: (p + (k % 5) * 10) % scale.nodes };
  });
  const keys = new Set(placement.map((x) => `${x.pv}/${x.node}`)).size;
  const minimumWrites = keys * 2 + (scale.pods - keys);

  // Controller, synced and idle.
  const port = freePort();
  const controller = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...(source ? ["-A", `--v8-flags=${v8Flags}`, `${ROOT}src/cmd/controller/main.ts`] : [
        "--allow-all",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-code-cache",
        `--v8-flags=${v8Flags}`,
        `${ROOT}dist/controller.js`,
      ]),
      "--mountpoint-namespace",
      mpNs,
      "--leader-elect=false",
      "--metrics-address",
      `127.0.0.1:${port}`,
      "--log-level",
      "warning",
      ...extraArgs,
    ],
    env: {
      KUBECONFIG: target.kubeconfig,
      // As in the image: no cache dir Deno can write, the image's malloc settings.
      ...(source ? {} : { DENO_DIR: "/nonexistent/deno", HOME: "/nonexistent" }),
      ...(glibcTunables ? { GLIBC_TUNABLES: glibcTunables } : {}),
    },
    cwd: ROOT,
    stdout: "null",
    stderr: "inherit",
  }).spawn();
  // A controller that dies (e.g. out of memory) ends the run at once instead of at the timeout.
  let exited: number | undefined;
  const died = controller.status.then((s) => {
    exited = s.code;
    throw new Error(`${scale.name}: the controller exited with code ${s.code}`);
  });
  died.catch(() => {});
  try {
    await until(
      "the controller's caches",
      async () => {
        const r = await fetch(`http://127.0.0.1:${port}/readyz`);
        await r.body?.cancel();
        return r.ok;
      },
      120_000,
      100,
    );
    await new Promise((r) => setTimeout(r, 1000));
    const idle = rss(controller.pid);
    const writesBefore = await controllerWrites(port);

    // Every workload attached: counted from a watch of the attachments.
    const watched = new Informer<MountpointS3PodAttachment>(client, S3PAS);
    const counts = new Map<string, number>();
    let attached = 0;
    let allAttached!: () => void;
    const done = new Promise<void>((r) => (allAttached = r));
    const count = (s: MountpointS3PodAttachment | undefined, sign: 1 | -1) => {
      if (!s?.spec.persistentVolumeName.startsWith(prefix)) return;
      const n = Object.values(s.spec.mountpointS3PodAttachments).flat().length;
      attached += sign * n;
      if (sign > 0) counts.set(s.metadata.name!, n);
      else counts.delete(s.metadata.name!);
      if (attached >= scale.pods) allAttached();
    };
    watched.on({
      add: (s) => count(s, 1),
      update: (old, s) => (count(old, -1), count(s, 1)),
      delete: (s) => count(s, -1),
    });
    const watching = new AbortController();
    const watch = watched.run(watching.signal);
    await watched.waitForSync(60_000);

    note(`${scale.name}: creating ${scale.pods} pods`);
    const started = performance.now();
    await pool(placement, 64, async ({ i, pv, node }) => {
      await client.create(PODS, {
        metadata: { name: `w-${i}`, namespace: ns },
        spec: {
          nodeName: `node-${node}`,
          containers: [{ name: "app", image: "busybox" }],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName: `claim-${pv}` } }],
        },
      });
    });
    const createdS = (performance.now() - started) / 1000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      done,
      died,
      new Promise((_, reject) =>
        timer = setTimeout(
          () => reject(new Error(`${scale.name}: not all attached in 10 min`)),
          600_000,
        )
      ),
    ]);
    clearTimeout(timer);
    const attachedS = (performance.now() - started) / 1000;
    note(`${scale.name}: all attached after ${attachedS.toFixed(1)} s`);
    // Let late writes (there should be none) land before counting.
    await new Promise((r) => setTimeout(r, 2000));
    const writes = (await controllerWrites(port)) - writesBefore;
    const after = rss(controller.pid);
    watching.abort();
    await watch;
    const mountpointPods = (await client.list(PODS, { namespace: mpNs })).items.length;
    return {
      scale,
      server: target.server,
      createdS,
      attachedS,
      attachments: counts.size,
      mountpointPods,
      keys,
      writes,
      minimumWrites,
      idleMb: idle.rssMb,
      afterMb: after.rssMb,
      peakMb: Math.max(after.peakMb, idle.peakMb),
    };
  } finally {
    if (exited === undefined) controller.kill("SIGTERM");
    await controller.status;
    await client.close();
  }
}

/** What the controller process runs (set from the command line). */
let artefact = "dist/controller.js as its image runs it";

function table(results: readonly Result[]): void {
  const head = results.map((r) =>
    `${r.scale.name} (${r.scale.pods} pods, ${r.scale.nodes} nodes, ${r.scale.pvs} PVs)`
  );
  const r2k = results.find((r) => r.scale.name === "real-2k");
  const r10k = results.find((r) => r.scale.name === "real-10k");
  const growth = r2k && r10k;
  out(
    `Controller scale (${new Date().toISOString()}; ${
      results.map((r) => `${r.scale.name}: ${r.server}`).join("; ")
    }; the controller: ${artefact})`,
  );
  out("");
  out(
    `Load average before / after: ${loadBefore} / ${loadAverage()} (2 vCPU shared with other work: ` +
      "the API server, etcd and the controller compete with it, so times vary with the load).",
  );
  out("");
  out(
    `| figure | ${head.join(" | ")} | goal |${growth ? " growth real 2k → 10k (×5 pods) |" : ""}`,
  );
  out(`|---|${results.map(() => "---").join("|")}|---|${growth ? "---|" : ""}`);
  const row = (
    name: string,
    cell: (r: Result) => string,
    goal: string,
    grow?: (a: Result, b: Result) => string,
  ) =>
    out(
      `| ${name} | ${results.map(cell).join(" | ")} | ${goal} |${
        growth ? ` ${grow ? grow(r2k!, r10k!) : ""} |` : ""
      }`,
    );
  const x = (a: number, b: number) => `×${(b / a).toFixed(2)}`;
  row("pods created by the benchmark in", (r) => `${r.createdS.toFixed(1)} s`, "");
  row(
    "… all attached this long after the last pod was created",
    (r) => `${(r.attachedS - r.createdS).toFixed(1)} s`,
    "",
  );
  row(
    "time until every workload is attached",
    (r) => `${r.attachedS.toFixed(1)} s`,
    "real: ≤ 20 s at 2k, ≤ 100 s at 10k",
    (a, b) => x(a.attachedS, b.attachedS),
  );
  row(
    "attachments / Mountpoint Pods (expected: one per PV × node)",
    (r) => `${r.attachments} / ${r.mountpointPods} (${r.keys})`,
    "",
  );
  row(
    "API writes by the controller / minimum (one per workload joining, two per new pod)",
    (r) => `${r.writes} / ${r.minimumWrites}`,
    "≤ minimum",
    (a, b) => x(a.writes, b.writes),
  );
  row(
    "writes per attachment (minimum)",
    (r) =>
      `${(r.writes / r.scale.pods).toFixed(3)} (${(r.minimumWrites / r.scale.pods).toFixed(3)})`,
    "",
  );
  row(
    "controller RSS idle / after",
    (r) => `${r.idleMb.toFixed(0)} / ${r.afterMb.toFixed(0)} MB`,
    "",
  );
  row(
    "controller peak RSS (VmHWM)",
    (r) => `${r.peakMb.toFixed(0)} MB`,
    "≤ 150 MB at 2k, ≤ 300 MB at 10k; issue 24: ≤ 90 MB at 2k",
    (a, b) => `${x(a.peakMb, b.peakMb)} (+${(b.peakMb - a.peakMb).toFixed(0)} MB)`,
  );
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    allowNegative: true,
    options: {
      only: { type: "string" },
      kubeconfig: { type: "string" },
      "v8-flags": { type: "string", default: V8_FLAGS.controller },
      "glibc-tunables": { type: "string", default: imageEnv("controller").GLIBC_TUNABLES ?? "" },
      "controller-args": { type: "string", default: "" },
      source: { type: "boolean", default: false },
      build: { type: "boolean", default: true },
    },
  });
  if (values.source) artefact = "src/cmd/controller/main.ts, warm cache";
  else if (!values["glibc-tunables"]) artefact += ", glibc's default malloc settings";
  if (!values.source && values.build) {
    const built = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${ROOT}scripts/build.ts`, "--only", "controller"],
      cwd: ROOT,
    }).output();
    if (!built.success) throw new Error("deno task build of the controller failed");
  }
  const names = values.only?.split(",") ?? SCALES.map((s) => s.name);
  const chosen = names.map((n) => {
    const s = SCALES.find((x) => x.name === n);
    if (!s) throw new Error(`unknown scale "${n}": ${SCALES.map((x) => x.name).join(", ")}`);
    return s;
  });
  const results: Result[] = [];
  const skipped: string[] = [];
  for (const scale of chosen) {
    let target: Target;
    try {
      target = values.kubeconfig
        ? {
          kubeconfig: values.kubeconfig,
          server: "given API server",
          close: () => Promise.resolve(),
        }
        : scale.tier === "emulator"
        ? await emulatorTarget()
        : await realTarget();
    } catch (err) {
      if (!(err instanceof SkipError)) throw err;
      skipped.push(`${scale.name}: ${err.message}`);
      continue;
    }
    try {
      results.push(
        await runScale(
          scale,
          target,
          values["v8-flags"],
          values["controller-args"].split(" ").filter(Boolean),
          values.source,
          values["glibc-tunables"],
        ),
      );
    } finally {
      await target.close().catch((err) => note(`${scale.name}: cleanup failed: ${err}`));
    }
  }
  table(results);
  for (const s of skipped) out(`\nNot measured: ${s}`);
  note("done");
}
