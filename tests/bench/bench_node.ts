/**
 * Node plugin benchmark (root, real FUSE), the engines on one S3 server in one run: a private
 * versitygw (`tests/testbed/services/versitygw/`), which accepts the writes of all — our
 * `mount-s3` (the default engine), upstream's own `mount-s3` as the reference (built from the same
 * published libraries by `scripts/build_upstream_engine.sh`, given by `UPSTREAM_MOUNT_S3` or found
 * in its cache; the mounter runs it in place of ours, with the same command line and environment)
 * and `rclone mount2` (the fallback) — side by side:
 *
 * 1. NodePublishVolume latency, p50/p99 over N publishes per engine:
 *    a. new source mount on an already Running Mountpoint Pod (fd passing + engine start + ready);
 *    b. a publish that shares an existing source mount (bind only).
 * 2. 256 MiB sequential write and read through the mount (`dd bs=1M`, as a workload) vs direct
 *    `@aws-sdk/client-s3` PUT/GET on the same server, medians of `--runs`; each run measures the
 *    SDK and then both engines, so every ratio compares figures taken under the same load.
 * 3. Idle RSS of the node plugin, of one mounter and of each engine.
 *
 * The machine is shared: the load average is printed before and after.
 *
 * Usage: `deno run -A tests/bench/bench_node.ts [--publishes=50] [--size-mib=256] [--runs=3]`
 *
 * @module
 */
import { parseArgs } from "node:util";
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import { PODS } from "../../src/kube/resources.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import type { Engine } from "../../src/mppod/mount_message.ts";
import {
  type Harness,
  kubeletMkdirParent,
  MOUNTER_ENV,
  skipReason,
  startHarness,
  startMounter,
} from "../testbed/harness/node_harness.ts";
import { runToEnd } from "../_helpers.ts";
import { readProcStat } from "../../scripts/proc_stat.ts";
import { upstreamBin } from "./bench_engine.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    publishes: { type: "string", default: "50" },
    "size-mib": { type: "string", default: "256" },
    runs: { type: "string", default: "3" },
    "read-ahead-kb": { type: "string", default: "" },
  },
});
const N = Number(values.publishes);
const SIZE = Number(values["size-mib"]) * 1024 * 1024;
const RUNS = Number(values.runs);
/** A column of the table: an engine, and the mount-s3 binary the mounter finds on its PATH. */
interface Column {
  readonly name: string;
  readonly engine: Engine;
  /** Directory put first on the mounters' PATH (upstream's mount-s3); none: the harness's. */
  readonly pathDir?: string;
}
const UPSTREAM = upstreamBin();
const COLUMNS: readonly Column[] = [
  { name: "mount-s3", engine: "mount-s3" },
  ...(UPSTREAM.bin
    ? [{
      name: "upstream mount-s3",
      engine: "mount-s3" as const,
      pathDir: UPSTREAM.bin.replace(/\/[^/]+$/, ""),
    }]
    : []),
  { name: "rclone", engine: "rclone" },
];
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

const median = (xs: number[]) => pct(xs, 50);

async function rssMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function childPids(pid: number): Promise<number[]> {
  const r = await runToEnd("pgrep", ["-P", String(pid)]);
  return r.stdout.trim().split("\n").filter(Boolean).map(Number);
}

/** CPU seconds (user + system) a process has used so far. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readProcStat(pid);
  if (!stat) throw new Error(`process ${pid} is gone: no CPU figures`);
  return stat.cpuSeconds;
}

/** Busy and total jiffies of all CPUs (from /proc/stat). */
async function machineCpu(): Promise<{ busy: number; total: number }> {
  const line = (await Deno.readTextFile("/proc/stat")).split("\n")[0]!;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3]! - f[4]!, total }; // idle and iowait
}

/** The S3 server process listening on `endpoint`'s port (versitygw, started by the harness). */
async function s3ServerPid(endpoint: string): Promise<number | undefined> {
  const port = new URL(endpoint).port;
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
    if (cmd.includes("versitygw") && cmd.includes(`:${port}\0`)) return Number(e.name);
  }
  return undefined;
}

/**
 * CPU used while `fn` runs: seconds of each process in `pids` and how busy the whole machine was
 * (percent of all its CPUs), the evidence of whether a figure is bound by CPU.
 */
async function withCpu<T>(
  pids: readonly (number | undefined)[],
  fn: () => Promise<T>,
): Promise<{ value: T; seconds: (number | undefined)[]; busyPct: number }> {
  const read = (pid: number | undefined) => pid === undefined ? undefined : cpuSeconds(pid);
  const before = await Promise.all(pids.map(read));
  const m0 = await machineCpu();
  const value = await fn();
  const m1 = await machineCpu();
  const after = await Promise.all(pids.map(read));
  return {
    value,
    seconds: before.map((b, i) => b === undefined ? undefined : after[i]! - b),
    busyPct: (100 * (m1.busy - m0.busy)) / Math.max(1, m1.total - m0.total),
  };
}

async function loadAverage(): Promise<string> {
  return (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
}

/**
 * A publish request of `engine`: both allow deletes and overwrites (rclone needs that) and keep
 * metadata 1 s (rclone's directory cache would hide the SDK's uploads for minutes otherwise).
 */
function request(h: Harness, engine: Engine, podUID: string, pv: string): NodePublishVolumeRequest {
  const r = h.publishRequest(podUID, pv);
  return {
    ...r,
    volumeCapability: {
      mount: { mountFlags: ["allow-delete", "allow-overwrite", "metadata-ttl=1"] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
    volumeContext: { ...r.volumeContext, engine },
  };
}

/** Figures of one engine: metric → value. */
type Figures = Map<string, string>;

/** Raw medians per column, for the ratios to upstream's mount-s3. */
const RAW = new Map<
  string,
  { newP50?: number; readMs?: number; writeMs?: number; readCpuS?: number }
>();

/** A volume kept published for the throughput figures, and its engine process. */
interface Published {
  readonly target: string;
  readonly enginePid: number | undefined;
}

/** Publish figures and idle RSS of a column; resolves with a volume that stays published. */
async function benchEngine(h: Harness, column: Column, figures: Figures): Promise<Published> {
  const { engine } = column;
  const tag = column.pathDir ? "u" : engine === "mount-s3" ? "m" : "r";
  const podOptions = column.pathDir
    ? {
      mounter: (dir: string) =>
        startMounter(dir, [], { ...MOUNTER_ENV, PATH: `${column.pathDir}:${MOUNTER_ENV.PATH}` }),
    }
    : {};
  // 1a. New source mount on a Running Mountpoint Pod.
  const fresh: number[] = [];
  const before = h.node.stderr().length;
  for (let i = 0; i < N; i++) {
    const mp = await h.mountpointPod(`mp-${tag}-new-${i}`, podOptions);
    const pv = `pv-${tag}-new-${i}`;
    const uid = `uid-${tag}-new-${i}`;
    await h.assign(pv, `vol-${pv}`, mp.name, [uid]);
    const target = h.target(uid, pv);
    await kubeletMkdirParent(target);
    const t0 = performance.now();
    await h.csi.node.nodePublishVolume(request(h, engine, uid, pv));
    fresh.push(performance.now() - t0);
    if (i === 0) {
      await new Promise((r) => setTimeout(r, 2000));
      const engines = await childPids(mp.mounter.child.pid);
      figures.set("idle RSS node plugin (MiB)", (await rssMiB(h.node.child.pid)).toFixed(0));
      figures.set("idle RSS mounter (MiB, Deno)", (await rssMiB(mp.mounter.child.pid)).toFixed(0));
      figures.set(
        "idle RSS engine (MiB)",
        engines.length ? (await rssMiB(engines[0]!)).toFixed(0) : "?",
      );
    }
    await h.csi.node.nodeUnpublishVolume({ volumeId: `vol-${pv}`, targetPath: target });
    await h.kube.patch(PODS, mp.name, "mount-s3", {
      metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
    }, { type: "merge" });
    await mp.mounter.child.status;
  }
  const steps = [
    ...h.node.stderr().slice(before).matchAll(
      /check\+prepare (\d+) ms, mount\+send (\d+) ms, engine ready (\d+) ms/g,
    ),
  ].map((m) => [Number(m[1]), Number(m[2]), Number(m[3])]);
  const med = (i: number) => pct(steps.map((s) => s[i]!), 50).toFixed(0);
  RAW.set(column.name, { ...RAW.get(column.name), newP50: pct(fresh, 50) });
  figures.set(
    `publish, new source mount: p50 / p99 ms (n=${N})`,
    `${pct(fresh, 50).toFixed(1)} / ${pct(fresh, 99).toFixed(1)}`,
  );
  figures.set(
    "of which (p50): bucket check+prepare / mount+send / engine ready ms",
    `${med(0)} / ${med(1)} / ${med(2)}`,
  );

  // 1b. Shared source mount: bind only.
  const shared = await h.mountpointPod(`mp-${tag}-shared`, podOptions);
  const uids = Array.from({ length: N + 1 }, (_, i) => `uid-${tag}-sh-${i}`);
  const pv = `pv-${tag}-sh`;
  await h.assign(pv, `vol-${pv}`, shared.name, uids);
  await kubeletMkdirParent(h.target(uids[0]!, pv));
  await h.csi.node.nodePublishVolume(request(h, engine, uids[0]!, pv)); // creates the source
  const bind: number[] = [];
  for (const uid of uids.slice(1)) {
    await kubeletMkdirParent(h.target(uid, pv));
    const t0 = performance.now();
    await h.csi.node.nodePublishVolume(request(h, engine, uid, pv));
    bind.push(performance.now() - t0);
  }
  figures.set(
    `publish, shared source mount: p50 / p99 ms (n=${N})`,
    `${pct(bind, 50).toFixed(1)} / ${pct(bind, 99).toFixed(1)}`,
  );

  // The shared volume stays published for the throughput figures.
  return {
    target: h.target(uids[0]!, pv),
    enginePid: (await childPids(shared.mounter.child.pid))[0],
  };
}

/**
 * 2. Throughput, medians of RUNS. Each run: SDK PUT and GET of a new object, then each engine
 * (alternating which goes first) writes a new file with dd and reads that object (which it has
 * not read before), so every ratio compares figures taken within a minute of each other.
 * Resolves with why each read ratio that misses its goal does (from the CPU figures).
 */
async function benchThroughput(
  h: Harness,
  targets: ReadonlyMap<string, Published>,
  figures: ReadonlyMap<string, Figures>,
): Promise<string[]> {
  const data = new Uint8Array(SIZE);
  for (let i = 0; i < SIZE; i += 4096) data[i] = i & 0xff;
  const mib = SIZE / 1024 / 1024;
  const mbps = (ms: number) => SIZE / 1e6 / (ms / 1000);
  const dd = async (args: string[]) => {
    const t = performance.now();
    const r = await runToEnd("dd", [...args, "bs=1M", `count=${mib}`]);
    if (r.code !== 0) throw new Error(`dd ${args.join(" ")} failed: ${r.stderr}`);
    return performance.now() - t;
  };
  const sdkGet = async (key: string) => {
    const got = await h.s3.send(new GetObjectCommand({ Bucket: h.bucket, Key: key }));
    let n = 0;
    for await (const c of got.Body!.transformToWebStream()) n += (c as Uint8Array).length;
    return n;
  };
  // Warm the SDK's code paths and connections first.
  await h.s3.send(
    new PutObjectCommand({ Bucket: h.bucket, Key: "warm.bin", Body: data.subarray(0, 16 << 20) }),
  );
  await sdkGet("warm.bin");
  const put: number[] = [];
  const get: number[] = [];
  const names = COLUMNS.map((c) => c.name);
  const write = new Map<string, number[]>(names.map((e) => [e, []]));
  const read = new Map<string, number[]>(names.map((e) => [e, []]));
  // CPU during each read: [reader or engine s, S3 server s, machine busy %] per run.
  const server = await s3ServerPid(h.rgw.S3_ENDPOINT!);
  const getCpu: number[][] = [];
  const readCpu = new Map<string, number[][]>(names.map((e) => [e, []]));
  const row = (c: { seconds: (number | undefined)[]; busyPct: number }) => [
    c.seconds[0] ?? NaN,
    c.seconds[1] ?? NaN,
    c.busyPct,
  ];
  for (let run = 0; run < RUNS; run++) {
    const key = `direct-${run}.bin`;
    let t0 = performance.now();
    await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: key, Body: data }));
    put.push(performance.now() - t0);
    t0 = performance.now();
    const g = await withCpu([Deno.pid, server], () => sdkGet(key));
    get.push(performance.now() - t0);
    getCpu.push(row(g));
    const n = g.value;
    if (n !== SIZE) throw new Error(`SDK GET returned ${n} bytes`);
    // Each run starts with another column, so each sees the others' load in turn.
    const order = names.map((_, i) => names[(i + run) % names.length]!);
    for (const engine of order) {
      const target = targets.get(engine);
      if (!target) continue;
      // dd, like a workload (bs=1M sequential; conv=fsync: the upload is complete when dd ends).
      const file = `${engine.replace(/ /g, "-")}-${run}.bin`;
      write.get(engine)!.push(
        await dd(["if=/dev/zero", `of=${target.target}/${file}`, "conv=fsync"]),
      );
      const r = await withCpu(
        [target.enginePid, server],
        () => dd([`if=${target.target}/${key}`, "of=/dev/null"]),
      );
      read.get(engine)!.push(r.value);
      readCpu.get(engine)!.push(row(r));
    }
  }
  const [sdkPutMs, sdkGetMs] = [median(put), median(get)];
  // What the whole machine spent per read, and the rate it would give with every CPU busy: a
  // read path that needs more CPU per byte than the machine has cannot go faster.
  const cores = navigator.hardwareConcurrency;
  const ceiling = (rows: number[][], ms: number) => {
    const cpuS = (median(rows.map((r) => r[2]!)) / 100) * cores * (ms / 1000);
    return { cpuS, mbps: SIZE / 1e6 / (cpuS / cores) };
  };
  const sdk = ceiling(getCpu, sdkGetMs);
  const sdkCpu = cpuFigure(getCpu);
  const verdicts: string[] = [];
  for (const engine of targets.keys()) {
    const f = figures.get(engine)!;
    const w = median(write.get(engine)!);
    const r = median(read.get(engine)!);
    f.set(
      `write ${mib} MiB: mount / SDK PUT MB/s (ratio)`,
      `${mbps(w).toFixed(0)} / ${mbps(sdkPutMs).toFixed(0)} (${(sdkPutMs / w).toFixed(2)})`,
    );
    f.set(
      `read ${mib} MiB: mount / SDK GET MB/s (ratio)`,
      `${mbps(r).toFixed(0)} / ${mbps(sdkGetMs).toFixed(0)} (${(sdkGetMs / r).toFixed(2)})`,
    );
    f.set("CPU during the SDK GET: client / S3 server s; machine busy %", sdkCpu);
    f.set(
      "CPU during the mount read: engine / S3 server s; machine busy %",
      cpuFigure(readCpu.get(engine)!),
    );
    RAW.set(engine, {
      ...RAW.get(engine),
      readMs: r,
      writeMs: w,
      readCpuS: median(readCpu.get(engine)!.map((x) => x[0]!).filter(Number.isFinite)),
    });
    const m = ceiling(readCpu.get(engine)!, r);
    const ratio = sdkGetMs / r;
    const best = m.mbps / mbps(sdkGetMs);
    if (ratio < RATIO_GOAL) {
      verdicts.push(
        `${engine}: read ratio ${ratio.toFixed(2)} < ${RATIO_GOAL}. Its read path used ${
          m.cpuS.toFixed(2)
        } CPU s of the machine per ${mib} MiB (the SDK GET ${
          sdk.cpuS.toFixed(2)
        }); with all ${cores} vCPUs busy that is at most ${m.mbps.toFixed(0)} MB/s, ${
          best.toFixed(2)
        } of the SDK's measured ${mbps(sdkGetMs).toFixed(0)} MB/s: ${
          best < RATIO_GOAL
            ? "on this machine the goal is bound by CPU, not by waiting"
            : "CPU would allow the goal; the read path waits"
        }.`,
      );
    }
    f.set(
      `machine CPU s per read, mount / SDK GET → MB/s with all ${cores} vCPUs busy (ratio)`,
      `${m.cpuS.toFixed(2)} / ${sdk.cpuS.toFixed(2)} → ${m.mbps.toFixed(0)} / ${
        sdk.mbps.toFixed(0)
      } (${(m.mbps / sdk.mbps).toFixed(2)})`,
    );
  }
  // Ours against upstream's own mount-s3 (same libraries, upstream's profile and allocator).
  const ours = RAW.get("mount-s3");
  const ref = RAW.get("upstream mount-s3");
  if (ours && ref) {
    const f = figures.get("mount-s3")!;
    const r2 = (
      x: number | undefined,
    ) => (x === undefined || !Number.isFinite(x) ? "?" : x.toFixed(2));
    f.set(
      "vs upstream mount-s3: write / read / new-mount publish p50 (ratio, ≥ 1 is as fast)",
      `${r2(ref.writeMs! / ours.writeMs!)} / ${r2(ref.readMs! / ours.readMs!)} / ${
        r2(ref.newP50! / ours.newP50!)
      }`,
    );
    f.set(
      "vs upstream mount-s3: engine CPU s per read (ours / upstream)",
      `${r2(ours.readCpuS)} / ${r2(ref.readCpuS)}`,
    );
  }
  return verdicts;
}

/** Medians of [process s, server s, busy %] rows, as a table cell. */
function cpuFigure(rows: number[][]): string {
  const col = (i: number) => median(rows.map((r) => r[i]!).filter((x) => Number.isFinite(x)));
  const sec = (i: number) => rows.some((r) => Number.isFinite(r[i])) ? col(i).toFixed(2) : "?";
  return `${sec(0)} / ${sec(1)}; ${col(2).toFixed(0)} %`;
}

/** The goal for the read and write ratios (mount vs SDK). */
const RATIO_GOAL = 0.9;

/** The goal for a metric row, when it has one. */
function goalOf(metric: string): string {
  if (metric.startsWith("publish, new source mount")) return "p50 ≤ 100 / p99 ≤ 300 ms";
  if (metric.startsWith("publish, shared source mount")) return "p50 ≤ 20 ms";
  if (metric.startsWith("write ") || metric.startsWith("read ")) {
    return `ratio ≥ ${RATIO_GOAL.toFixed(2)}`;
  }
  if (metric.startsWith("vs upstream mount-s3: write")) return "each ≥ 1.00";
  if (metric.startsWith("vs upstream mount-s3: engine CPU")) return "same CPU per GiB";
  return "";
}

async function main(): Promise<number> {
  const reason = skipReason({ s3: "versitygw" }) ??
    skipReason({ s3: "versitygw", defaultEngine: "rclone" });
  if (reason) {
    out(`bench_node: cannot run: ${reason}`);
    return 1;
  }
  const loadBefore = await loadAverage();
  await using h = await startHarness({
    s3: "versitygw",
    nodeArgs: values["read-ahead-kb"] ? [`--read-ahead-kb=${values["read-ahead-kb"]}`] : [],
  });
  const figures = new Map<string, Figures>();
  const failures: string[] = [];
  const targets = new Map<string, Published>();
  /** Why a read ratio misses its goal, computed from the figures (printed under the table). */
  const verdicts: string[] = [];
  const failed = (what: string, err: unknown) =>
    failures.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  for (const column of COLUMNS) {
    const f: Figures = new Map();
    figures.set(column.name, f);
    try {
      targets.set(column.name, await benchEngine(h, column, f));
    } catch (err) {
      failed(column.name, err);
    }
  }
  try {
    verdicts.push(...await benchThroughput(h, targets, figures));
  } catch (err) {
    failed("throughput", err);
  }
  const loadAfter = await loadAverage();
  out(
    `\nNode plugin benchmark (read_ahead_kb=${
      values["read-ahead-kb"] || "node default"
    }; the engines on one versitygw ${h.rgw.S3_ENDPOINT}; throughput: medians of ${RUNS} runs)`,
  );
  out(
    `load average: ${loadBefore} before, ${loadAfter} after (1/5/15 min; 2 vCPU shared with other work)`,
  );
  out(
    "SDK baseline: one PutObject / GetObject of the whole object (Deno fetch) on the same local (loopback) server; the GET reads from the server's page cache. Mount: dd bs=1M, conv=fsync for writes.",
  );
  out(
    UPSTREAM.bin
      ? `Reference: upstream's own mount-s3 (\`${UPSTREAM.bin}\`), run by the mounter in place of ours.`
      : `No upstream mount-s3 column: ${UPSTREAM.reason}.`,
  );
  out("");
  const names = COLUMNS.map((c) => c.name);
  out(`| metric | ${names.join(" | ")} | goal |`);
  out(`|---|${names.map(() => "---").join("|")}|---|`);
  const metrics = [...new Set(names.flatMap((e) => [...figures.get(e)!.keys()]))];
  for (const metric of metrics) {
    const cells = names.map((e) =>
      figures.get(e)!.get(metric) ?? (metric.startsWith("vs upstream") ? "" : "not measured")
    );
    out(`| ${metric} | ${cells.join(" | ")} | ${goalOf(metric)} |`);
  }
  for (const v of verdicts) out(`\n${v}`);
  for (const f of failures) out(`\nFailed: ${f}`);
  return failures.length ? 1 : 0;
}

if (import.meta.main) Deno.exit(await main());
