/**
 * What it costs that mounts outlive their engine (ADR 0012), on a private versitygw (root, FUSE):
 *
 * 1. Throughput and metadata, `mount-s3` alone (no session: the library's numbers, nothing
 *    recorded) vs through `s3-csi-supervisor` with a session (own numbers, the session table, file
 *    handles with a generation): 256 MiB sequential write and read (`dd bs=1M`), and 1000 small
 *    files created, stat'ed and listed (where the table is written). Medians of `--runs`, the two
 *    variants alternating in each run; goal: the session at most 5 % slower.
 * 2. Publish latency through the node plugin: a new source mount on a Mountpoint Pod whose image
 *    speaks protocol 1 (no session, the fd closed) vs protocol 2 (a session, the fd kept and
 *    recorded); p50/p99 of `--publishes` each.
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
 * [--kills=10] [--pods=5] [--only throughput,publish,pauses,memory]`
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
    pods: { type: "string", default: "5" },
    only: { type: "string", default: "throughput,publish,pauses,memory" },
  },
});
const PARTS = new Set(values.only.split(","));
const RUNS = Number(values.runs);
const SIZE_MIB = Number(values["size-mib"]);
const PUBLISHES = Number(values.publishes);
const KILLS = Number(values.kills);
const PODS = Number(values.pods);
/** How long a Mountpoint Pod has been idle (after its publish) when it is measured. */
const IDLE_MS = 5_000;
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));
const median = (xs: number[]) => percentile(xs, 50);

async function timed(f: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await f();
  return (performance.now() - t0) / 1000;
}

async function sh(script: string): Promise<void> {
  const r = await runToEnd("sh", ["-c", script]);
  if (r.code !== 0) throw new Error(`${script}: exit ${r.code}: ${r.stderr.slice(-500)}`);
}

type Variant = "plain" | "session";

interface Sample {
  write: number;
  read: number;
  files: number;
}

async function throughput(server: Awaited<ReturnType<typeof startVersitygw>>, bucket: string) {
  const samples: Record<Variant, Sample[]> = { plain: [], session: [] };
  for (let run = 0; run < RUNS; run++) {
    for (const variant of (run % 2 ? ["session", "plain"] : ["plain", "session"]) as Variant[]) {
      const m = await supervise(server, bucket, { session: variant === "session" });
      try {
        const key = `${variant}-${run}`;
        const write = await timed(() =>
          sh(`dd if=/dev/zero of=${m.dir}/${key}.bin bs=1M count=${SIZE_MIB} status=none`)
        );
        await m.stop();
        // A fresh mount: nothing of the file in the page cache.
        const r = await supervise(server, bucket, { session: variant === "session" });
        try {
          const read = await timed(() =>
            sh(`dd if=${r.dir}/${key}.bin of=/dev/null bs=1M status=none`)
          );
          const files = await timed(() =>
            sh(
              `mkdir ${r.dir}/${key} && cd ${r.dir}/${key} && i=0; while [ $i -lt 1000 ]; do : > f$i; i=$((i+1)); done; ls -l . > /dev/null; stat f* > /dev/null`,
            )
          );
          samples[variant].push({ write: SIZE_MIB / write, read: SIZE_MIB / read, files });
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

async function publishLatency(): Promise<Record<"protocol 1" | "protocol 2", number[]>> {
  const out: Record<"protocol 1" | "protocol 2", number[]> = { "protocol 1": [], "protocol 2": [] };
  await using h = await startEngineNode();
  for (let i = 0; i < PUBLISHES; i++) {
    for (const p of ["protocol 1", "protocol 2"] as const) {
      const t0 = performance.now();
      await publishVolume(h, {
        flags: ["allow-delete"],
        pod: { protocols: p === "protocol 1" ? "1-1" : undefined },
      });
      out[p].push(performance.now() - t0);
    }
  }
  return out;
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
  await using server = await startVersitygw();
  const s3 = await s3Client(server);
  await using bucket = await tempBucket(s3);
  s3.destroy();
  const t = PARTS.has("throughput") ? await throughput(server, bucket.name) : undefined;
  const pub = PARTS.has("publish") ? await publishLatency() : undefined;
  const p = PARTS.has("pauses") ? await pauses(server, bucket.name) : undefined;
  const mem = PARTS.has("memory") ? await podMemory() : undefined;
  const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  const ratio = (a: number, b: number) => `${((a / b - 1) * 100).toFixed(1)} %`;
  const parts = [
    t && `mount-s3 alone vs through s3-csi-supervisor with a session, medians of ${RUNS}` +
      " alternating runs",
    pub && `publish latency through the node plugin, ${PUBLISHES} each`,
    p && `the pause after ${KILLS} SIGKILLs of the engine under a workload`,
    mem && `the idle resident memory of ${PODS} Mountpoint Pods, each ${IDLE_MS / 1000} s after` +
      " its publish (protocol 2; medians)",
  ].filter(Boolean);
  out(
    `Mounts outlive their engine (ADR 0012): what the session costs: ${parts.join("; ")}` +
      ` (load average ${load}).\n`,
  );
  out("| figure | without session | with session | difference | goal |");
  out("| --- | ---: | ---: | ---: | --- |");
  if (t) {
    const med = (v: Variant, k: keyof Sample) => median(t[v].map((x) => x[k]));
    out(
      `| write ${SIZE_MIB} MiB (MB/s) | ${med("plain", "write").toFixed(0)} | ${
        med("session", "write").toFixed(0)
      } | ${ratio(med("session", "write"), med("plain", "write"))} | ≥ −5 % |`,
    );
    out(
      `| read ${SIZE_MIB} MiB (MB/s) | ${med("plain", "read").toFixed(0)} | ${
        med("session", "read").toFixed(0)
      } | ${ratio(med("session", "read"), med("plain", "read"))} | ≥ −5 % |`,
    );
    out(
      `| 1000 files created, listed, stat'ed (s) | ${med("plain", "files").toFixed(2)} | ${
        med("session", "files").toFixed(2)
      } | ${ratio(med("session", "files"), med("plain", "files"))} | ≤ +5 % |`,
    );
  }
  for (const q of pub ? [50, 99] : []) {
    const a = percentile(pub!["protocol 1"], q);
    const b = percentile(pub!["protocol 2"], q);
    out(
      `| publish, new source, p${q} (ms) | ${a.toFixed(0)} | ${b.toFixed(0)} | ${
        ratio(b, a)
      } | ≤ +5 % |`,
    );
  }
  if (p) {
    const valid = p.filter((x) => Number.isFinite(x));
    out(
      `| pause after SIGKILL of the engine, p50 / p99 (ms) | — | ${percentile(valid, 50)} / ${
        percentile(valid, 99)
      } | | p99 ≤ 2000 |`,
    );
  }
  if (mem) {
    const m = (k: keyof PodMemory) => median(mem.map((x) => x[k])).toFixed(1);
    const range = `${Math.min(...mem.map((x) => x.total)).toFixed(1)}–${
      Math.max(...mem.map((x) => x.total)).toFixed(1)
    }`;
    out(
      `| Mountpoint Pod idle, serving a mount: supervisor + mount-s3 = all its processes (MiB RSS; min–max) | — | ${
        m("supervisor")
      } + ${m("engine")} = ${m("total")} (${range}; ${
        median(mem.map((x) => x.processes))
      } processes) | | ≤ 30 MiB |`,
    );
  }
  out("");
  return 0;
}

if (import.meta.main) Deno.exit(await main());
