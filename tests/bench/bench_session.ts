/**
 * What it costs that mounts outlive their engine (ADR 0012), on a private versitygw (root, FUSE):
 *
 * 1. Throughput and metadata, `mount-s3` alone (no session: the adapter's numbers kept in memory
 *    only, nothing recorded, no supervisor) vs through `s3-csi-supervisor` with a session (the
 *    session table on disk, the fd in custody): 256 MiB sequential write and read (`dd bs=1M`), and
 *    1000 small files created, listed and stat'ed (where the table is written). With
 *    `--library-engine=<mount-s3>` (or `SESSION_BENCH_LIBRARY_ENGINE`) a third variant: a mount-s3
 *    built with the library's own FUSE layer (`mountpoint_s3_fs::fuse::S3FuseFilesystem`) in place
 *    of our adapter, i.e. the engine before ADR 0012 (docs/benchmarks.md says how it is built).
 *    `--before-engine=<mount-s3>` adds a variant with a session served by another build (an A/B
 *    of a change to the session path within the same runs). Medians of `--runs`, the variants in rotating order in each run, with the engine's CPU time
 *    (user + system, from /proc) per phase: less noisy than wall time on a shared machine. Goal:
 *    the session at most 5 % slower.
 * 2. Publish latency through the node plugin (the NodePublishVolume call alone, the Mountpoint Pod
 *    already running): a new source mount on a Mountpoint Pod whose image speaks protocol 1 (no
 *    session, the fd closed) vs protocol 2 (a session, the fd kept and recorded), alternating;
 *    p50/p99 of `--publishes` each.
 * 3. The pause after the engine is SIGKILLed under a workload (`--kills` times, each engine having
 *    served 1.5 s): from the kill to the workload's next answered operation, p50/p99. Goal p99 ≤ 2 s.
 * 4. Idle resident memory of a Mountpoint Pod serving a mount (issue 24: ≤ 30 MiB): `--pods` fresh
 *    pods published through the node plugin (protocol 2, the session held), each measured
 *    `IDLE_MS` after its publish: VmRSS of every process of the pod — the mounter's PID, which is
 *    `s3-csi-supervisor` by then (the mounter `execve`s it once it has the FUSE fd, so no Deno stays
 *    resident), and its `mount-s3` child. Medians.
 *
 * Prints a Markdown section (`## session`) for `deno task bench`.
 *
 * Usage: `deno run -A tests/bench/bench_session.ts [--runs=5] [--size-mib=256] [--publishes=20]
 * [--kills=10] [--pods=5] [--library-engine=PATH] [--before-engine=PATH]
 * [--only=throughput,publish,pauses,memory]`
 *
 * @module
 */
import { parseArgs } from "node:util";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import {
  engineBin,
  fuseReason,
  s3Client,
  startVersitygw,
  tempBucket,
  testBytes,
  versitygwReason,
} from "../testbed/harness/engine.ts";
import { pauseAfter, startWorkload, supervise } from "../testbed/harness/engine_session.ts";
import { percentile, runToEnd } from "../_helpers.ts";
import { enginePid, publishVolume, startEngineNode } from "../testbed/harness/engine_node.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    runs: { type: "string", default: "5" },
    "size-mib": { type: "string", default: "256" },
    publishes: { type: "string", default: "20" },
    kills: { type: "string", default: "10" },
    "library-engine": { type: "string" },
    "before-engine": { type: "string" },
    pods: { type: "string", default: "5" },
    only: { type: "string", default: "throughput,publish,pauses,memory" },
  },
});
const RUNS = Number(values.runs);
const SIZE_MIB = Number(values["size-mib"]);
const PUBLISHES = Number(values.publishes);
const KILLS = Number(values.kills);
const PODS = Number(values.pods);
/** How long a Mountpoint Pod has been idle (after its publish) when it is measured. */
const IDLE_MS = 5_000;
const LIBRARY = values["library-engine"] ?? Deno.env.get("SESSION_BENCH_LIBRARY_ENGINE");
const BEFORE = values["before-engine"];
const ONLY = new Set(values.only.split(","));
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));
const median = (xs: number[]) => percentile(xs, 50);
const loadAverage = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");

async function timed(f: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await f();
  return (performance.now() - t0) / 1000;
}

async function sh(script: string): Promise<void> {
  const r = await runToEnd("sh", ["-c", script]);
  if (r.code !== 0) throw new Error(`${script}: exit ${r.code}: ${r.stderr.slice(-500)}`);
}

/** CPU seconds (user + system) process `pid` has used so far. */
function cpuSeconds(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime (fields 14, 15) in USER_HZ
}

type Variant = "library" | "plain" | "session" | "before";
const LABEL: Record<Variant, string> = {
  library: "library FUSE layer (before ADR 0012)",
  plain: "adapter, no session",
  session: "adapter + session + custody",
  before: "adapter + session + custody, --before-engine",
};

interface Sample {
  write: number;
  read: number;
  files: number;
  writeCpu: number;
  readCpu: number;
  filesCpu: number;
}

async function throughput(
  server: Awaited<ReturnType<typeof startVersitygw>>,
  bucket: string,
  variants: Variant[],
) {
  const samples: Record<Variant, Sample[]> = { library: [], plain: [], session: [], before: [] };
  for (let run = 0; run < RUNS; run++) {
    const order = variants.map((_, i) => variants[(i + run) % variants.length]!);
    for (const variant of order) {
      const options = {
        session: variant === "session" || variant === "before",
        ...(variant === "library" && LIBRARY ? { bin: LIBRARY } : {}),
        ...(variant === "before" && BEFORE ? { bin: BEFORE } : {}),
      };
      const m = await supervise(server, bucket, options);
      try {
        const key = `${variant}-${run}`;
        const pid = options.session ? await m.enginePid() : m.proc.child.pid;
        const c0 = cpuSeconds(pid);
        const write = await timed(() =>
          sh(`dd if=/dev/zero of=${m.dir}/${key}.bin bs=1M count=${SIZE_MIB} status=none`)
        );
        const writeCpu = cpuSeconds(pid) - c0;
        await m.stop();
        // A fresh mount: nothing of the file in the page cache.
        const r = await supervise(server, bucket, options);
        try {
          const rpid = options.session ? await r.enginePid() : r.proc.child.pid;
          const c1 = cpuSeconds(rpid);
          const read = await timed(() =>
            sh(`dd if=${r.dir}/${key}.bin of=/dev/null bs=1M status=none`)
          );
          const c2 = cpuSeconds(rpid);
          const files = await timed(() =>
            sh(
              `mkdir ${r.dir}/${key} && cd ${r.dir}/${key} && i=0; while [ $i -lt 1000 ]; do : > f$i; i=$((i+1)); done; ls -l . > /dev/null; stat f* > /dev/null`,
            )
          );
          const c3 = cpuSeconds(rpid);
          samples[variant].push({
            write: SIZE_MIB / write,
            read: SIZE_MIB / read,
            files,
            writeCpu,
            readCpu: c2 - c1,
            filesCpu: c3 - c2,
          });
        } finally {
          await r.stop();
        }
      } finally {
        await m.stop();
      }
    }
  }
  return samples;
}

type Protocol = "protocol 1" | "protocol 2";

/** The node plugin's phases of one publish (its "Mounted bucket" log line), ms. */
interface Phases {
  prepare: number;
  send: number;
  ready: number;
}

function phasesOf(log: string, mp: string): Phases | undefined {
  const re = new RegExp(
    `Mountpoint Pod \\S*${mp}"? \\(check\\+prepare (\\d+) ms, mount\\+send (\\d+) ms, engine ready (\\d+) ms\\)`,
  );
  const m = re.exec(log);
  return m ? { prepare: Number(m[1]), send: Number(m[2]), ready: Number(m[3]) } : undefined;
}

async function publishLatency(): Promise<
  { ms: Record<Protocol, number[]>; phases: Record<Protocol, Phases[]> }
> {
  const out: Record<Protocol, number[]> = { "protocol 1": [], "protocol 2": [] };
  const phases: Record<Protocol, Phases[]> = { "protocol 1": [], "protocol 2": [] };
  await using h = await startEngineNode();
  for (let i = 0; i < PUBLISHES; i++) {
    const order = i % 2
      ? ["protocol 2", "protocol 1"] as const
      : ["protocol 1", "protocol 2"] as const;
    for (const p of order) {
      const published = await publishVolume(h, {
        flags: ["allow-delete"],
        pod: { protocols: p === "protocol 1" ? "1-1" : undefined },
      });
      out[p].push(published.publishMs);
      const ph = phasesOf(h.node.stderr(), published.mp.name);
      if (ph) phases[p].push(ph);
    }
  }
  return { ms: out, phases };
}

/** Resident memory of a process, MiB, and its name (`comm`, at most 15 characters). */
async function resident(pid: number): Promise<{ mib: number; comm: string }> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return { mib: kib / 1024, comm: /Name:\s+(\S+)/.exec(status)?.[1] ?? "?" };
}

/** A process and all its descendants (`pgrep -P`, recursively). */
async function processTree(pid: number): Promise<number[]> {
  const r = await runToEnd("pgrep", ["-P", String(pid)]);
  const children = r.stdout.trim().split("\n").filter(Boolean).map(Number);
  return [pid, ...(await Promise.all(children.map(processTree))).flat()];
}

interface PodMemory {
  supervisor: number;
  engine: number;
  total: number;
  processes: number;
}

/** Part 4: idle resident memory of Mountpoint Pods serving a mount (see the module's doc). */
async function podMemory(): Promise<PodMemory[]> {
  const out: PodMemory[] = [];
  await using h = await startEngineNode();
  for (let i = 0; i < PODS; i++) {
    const p = await publishVolume(h, { flags: ["allow-delete"] });
    const engine = await enginePid(p.mp);
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const pid = p.mp.mounter.child.pid;
    const sup = await resident(pid);
    if (!sup.comm.startsWith("s3-csi-supervis")) {
      throw new Error(`the Mountpoint Pod's process ${pid} is ${sup.comm}, not the supervisor`);
    }
    const tree = await processTree(pid);
    const all = await Promise.all(tree.map(resident));
    out.push({
      supervisor: sup.mib,
      engine: (await resident(engine)).mib,
      total: all.reduce((a, x) => a + x.mib, 0),
      processes: tree.length,
    });
  }
  return out;
}

async function pauses(server: Awaited<ReturnType<typeof startVersitygw>>, bucket: string) {
  const s3 = await s3Client(server);
  await s3.send(
    new PutObjectCommand({ Bucket: bucket, Key: "p/held.bin", Body: testBytes(4 << 20, 5) }),
  );
  s3.destroy();
  const m = await supervise(server, bucket, { maxRestarts: KILLS + 1, windowMs: 1000 });
  try {
    const w = startWorkload(`${m.dir}/p`, "held.bin");
    await new Promise((r) => setTimeout(r, 1500));
    const at: number[] = [];
    for (let i = 0; i < KILLS; i++) {
      const pid = await m.enginePid();
      at.push(Date.now());
      Deno.kill(pid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 1500));
    }
    const report = await w.stop();
    return at.map((t) => pauseAfter(report, t) ?? Number.NaN);
  } finally {
    await m.stop();
  }
}

async function main(): Promise<number> {
  const reason = fuseReason() ?? engineBin().reason ?? versitygwReason();
  out("## session\n");
  if (reason) {
    out(`Not run: ${reason}.\n`);
    return 0;
  }
  for (const bin of [LIBRARY, BEFORE]) {
    if (bin !== undefined && !(await Deno.stat(bin)).isFile) {
      throw new Error(`${bin} is not a file`);
    }
  }
  const variants: Variant[] = [
    ...(LIBRARY ? ["library" as const] : []),
    "plain",
    "session",
    ...(BEFORE ? ["before" as const] : []),
  ];
  const loadBefore = loadAverage();
  await using server = await startVersitygw();
  const s3 = await s3Client(server);
  await using bucket = await tempBucket(s3);
  s3.destroy();
  const t = ONLY.has("throughput") ? await throughput(server, bucket.name, variants) : undefined;
  const pub = ONLY.has("publish") ? await publishLatency() : undefined;
  const p = ONLY.has("pauses") ? await pauses(server, bucket.name) : undefined;
  const mem = ONLY.has("memory") ? await podMemory() : undefined;
  const loadAfter = loadAverage();
  const ratio = (a: number, b: number) =>
    `${a >= b ? "+" : "−"}${Math.abs((a / b - 1) * 100).toFixed(1)} %`;
  out(
    `\`deno run -A tests/bench/bench_session.ts --runs=${RUNS} --publishes=${PUBLISHES} --kills=${KILLS}` +
      `${LIBRARY ? " --library-engine=…" : ""}${
        BEFORE ? " --before-engine=…" : ""
      }\`: mount-s3 alone vs through s3-csi-supervisor with a` +
      ` session, medians of ${RUNS} runs (variants in rotating order); publish latency of the` +
      ` NodePublishVolume call, ${PUBLISHES} each, alternating; the pause after ${KILLS} SIGKILLs of the` +
      ` engine under a workload. Load average (1/5/15 min) before / after: ${loadBefore} / ${loadAfter}` +
      ` (2 vCPU shared with other work).\n`,
  );
  const cols = variants.map((v) => LABEL[v]);
  out(`| figure | ${cols.join(" | ")} | session vs no session | goal |`);
  out(`| --- | ${cols.map(() => "---:").join(" | ")} | ---: | --- |`);
  if (t) {
    const med = (v: Variant, k: keyof Sample) => median(t[v].map((x) => x[k]));
    const range = (v: Variant, k: keyof Sample, digits: number) => {
      const xs = t[v].map((x) => x[k]);
      return `${med(v, k).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${
        Math.max(...xs).toFixed(digits)
      })`;
    };
    const row = (label: string, k: keyof Sample, digits: number, goal: string) =>
      out(
        `| ${label} | ${variants.map((v) => range(v, k, digits)).join(" | ")} | ${
          ratio(med("session", k), med("plain", k))
        } | ${goal} |`,
      );
    row(`write ${SIZE_MIB} MiB, MB/s (min–max)`, "write", 0, "≥ −5 %");
    row(`read ${SIZE_MIB} MiB, MB/s (min–max)`, "read", 0, "≥ −5 %");
    row("1000 files created, listed, stat'ed, s (min–max)", "files", 2, "≤ +5 %");
    row(`engine CPU s for the write`, "writeCpu", 2, "");
    row(`engine CPU s for the read`, "readCpu", 2, "");
    row(`engine CPU s for the 1000 files`, "filesCpu", 2, "");
  }
  if (pub) {
    for (const q of [50, 99]) {
      const a = percentile(pub.ms["protocol 1"], q);
      const b = percentile(pub.ms["protocol 2"], q);
      const cells = variants.map((v) =>
        v === "plain" ? a.toFixed(0) : v === "session" ? b.toFixed(0) : "—"
      );
      out(`| publish, new source, p${q}, ms | ${cells.join(" | ")} | ${ratio(b, a)} | ≤ +5 % |`);
    }
    const phase = (p: Protocol) => {
      const xs = pub.phases[p];
      if (!xs.length) return "?";
      const k = (f: keyof Phases) => median(xs.map((x) => x[f])).toFixed(0);
      return `${k("prepare")} / ${k("send")} / ${k("ready")}`;
    };
    const cells = variants.map((v) =>
      v === "plain" ? phase("protocol 1") : v === "session" ? phase("protocol 2") : "—"
    );
    out(
      `| of which (p50, the node plugin's log): check+prepare / mount+send / engine ready, ms | ${
        cells.join(" | ")
      } | | |`,
    );
  }
  if (p) {
    const valid = p.filter((x) => Number.isFinite(x));
    const cells = variants.map((v) =>
      v === "session" ? `${percentile(valid, 50)} / ${percentile(valid, 99)}` : "—"
    );
    out(
      `| pause after SIGKILL of the engine, p50 / p99, ms (${valid.length} of ${p.length} answered) | ${
        cells.join(" | ")
      } | | p99 ≤ 2000 |`,
    );
  }
  if (mem) {
    const m = (k: keyof PodMemory) => median(mem.map((x) => x[k])).toFixed(1);
    const range = `${Math.min(...mem.map((x) => x.total)).toFixed(1)}–${
      Math.max(...mem.map((x) => x.total)).toFixed(1)
    }`;
    const cells = variants.map((v) =>
      v === "session"
        ? `${m("supervisor")} + ${m("engine")} = ${m("total")} (${range}; ${
          median(mem.map((x) => x.processes))
        } processes)`
        : "—"
    );
    out(
      `| Mountpoint Pod idle, serving a mount: supervisor + mount-s3 = all its processes (MiB RSS; min–max; ${PODS} pods, ${
        IDLE_MS / 1000
      } s after publish) | ${cells.join(" | ")} | | ≤ 30 MiB |`,
    );
  }
  out("");
  return 0;
}

if (import.meta.main) Deno.exit(await main());
