/**
 * Engine benchmark (root, real FUSE): our `mount-s3` side by side with upstream's own `mount-s3`
 * (built from the same published libraries with upstream's release profile and allocator by
 * `scripts/build_upstream_engine.sh`) and the SDK, each mounted directly on a directory against one
 * private versitygw — the engines alone, without the node plugin and mounter around them.
 *
 * Per run (medians of `--runs`, the variants' order rotating every run so each sees the same load):
 * - start: from exec to the first `stat` of an object that answers (the time a new mount costs);
 * - read: `dd bs=1M` of a `--size-mib` object the mount has not read before, and the engine's CPU
 *   seconds for it (utime + stime, per GiB);
 * - write: `dd bs=1M conv=fsync` of a new file (the upload completes at fsync), and its CPU;
 * - the engine's resident memory once mounted and idle (1 s after its first answer);
 * - the SDK: one GetObject / PutObject of the same size (Deno fetch), the repository's baseline.
 *
 * Variants: `ours` (scripts/build_engine.sh, or `S3CSI_ENGINE_BIN`), `upstream` (`UPSTREAM_MOUNT_S3`,
 * else the newest build in the cache of build_upstream_engine.sh), more with `--engine name=path`;
 * each at every `--read-ahead-kb` (comma-separated; the FUSE mount's bdi read_ahead_kb, as the
 * node plugin sets it; default 256, the node's default).
 *
 * Engines get exactly the environment they are given (no RUST_BACKTRACE: it makes upstream's start
 * several times slower); ours serves its Prometheus metrics as in a Mountpoint Pod.
 *
 * Usage: `deno run -A tests/bench/bench_engine.ts [--runs=10] [--size-mib=256] [--read-ahead-kb=256]
 *   [--engine name=/path ...]` — prints a Markdown section (used by `deno task bench`).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import {
  engineBin,
  engineEnv,
  fuseReason,
  s3Client,
  type Server,
  startVersitygw,
  tempBucket,
  testBytes,
  versitygwReason,
} from "../testbed/harness/engine.ts";
import { freePort, runToEnd, spawn } from "../_helpers.ts";
import { findMount, readMountInfo } from "../../src/sys/mountinfo.ts";
import { readProcStat } from "../../scripts/proc_stat.ts";

/** Where scripts/build_upstream_engine.sh keeps its builds. */
export const UPSTREAM_CACHE = Deno.env.get("S3CSI_UPSTREAM_CACHE") ??
  "/var/cache/s3csi-upstream-mount-s3";

/**
 * Upstream's mount-s3: `UPSTREAM_MOUNT_S3`, else the newest cached build; or why there is none.
 */
export function upstreamBin(): { bin?: string; reason?: string } {
  const fromEnv = Deno.env.get("UPSTREAM_MOUNT_S3");
  const isFile = (p: string) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  };
  if (fromEnv) {
    return isFile(fromEnv)
      ? { bin: fromEnv }
      : { reason: `UPSTREAM_MOUNT_S3=${fromEnv} is not a file` };
  }
  let newest: { bin: string; mtime: number } | undefined;
  try {
    for (const e of Deno.readDirSync(UPSTREAM_CACHE)) {
      const bin = `${UPSTREAM_CACHE}/${e.name}/mount-s3`;
      if (!e.isDirectory || !isFile(bin)) continue;
      const mtime = Deno.statSync(bin).mtime?.getTime() ?? 0;
      if (!newest || mtime > newest.mtime) newest = { bin, mtime };
    }
  } catch { /* no cache */ }
  return newest ? { bin: newest.bin } : {
    reason:
      "upstream's mount-s3 is not built: run scripts/build_upstream_engine.sh <a checkout of github.com/awslabs/mountpoint-s3> (its sources cannot be fetched here), or set UPSTREAM_MOUNT_S3=/path/to/mount-s3",
  };
}

const MIB = 1024 * 1024;
/** The engines' metrics port (one mount at a time). */
const METRICS_PORT = freePort();

/** One engine at one read-ahead. */
interface Variant {
  readonly name: string;
  readonly bin: string;
  readonly readAheadKb: number;
}

/** Figures of one variant, one array entry per run. */
interface Figures {
  startS: number[];
  readMBps: number[];
  writeMBps: number[];
  readCpuPerGiB: number[];
  writeCpuPerGiB: number[];
  idleRssMiB: number[];
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : NaN;
};

async function rssMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function cpu(pid: number): Promise<number> {
  const s = await readProcStat(pid);
  if (!s) throw new Error(`engine ${pid} is gone`);
  return s.cpuSeconds;
}

async function dd(args: string[]): Promise<number> {
  const t = performance.now();
  const r = await runToEnd("dd", [...args, "bs=1M", "status=none"]);
  if (r.code !== 0) throw new Error(`dd ${args.join(" ")}: ${r.stderr}`);
  return performance.now() - t;
}

/**
 * Mount `v` on a new directory, time its first answer to `stat(<dir>/<probe>)`, run `fn`, unmount.
 */
async function withMount<T>(
  v: Variant,
  server: Server,
  bucket: string,
  probe: string,
  fn: (dir: string, pid: number, startS: number) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-bench-" });
  const t0 = performance.now();
  // Ours serves its metrics as in a Mountpoint Pod (upstream always runs its metrics sink).
  const proc = spawn(v.bin, [bucket, dir, "--foreground", "--force-path-style"], {
    env: engineEnv(server, { MOUNT_S3_METRICS_PORT: String(METRICS_PORT) }),
    clearEnv: true,
  });
  let exited: number | undefined;
  proc.child.status.then((s) => (exited = s.code));
  try {
    for (;;) {
      if (exited !== undefined) {
        throw new Error(`${v.name} exited ${exited}: ${proc.stderr()} ${proc.stdout()}`);
      }
      if (await Deno.stat(`${dir}/${probe}`).then(() => true, () => false)) break;
      if (performance.now() - t0 > 30_000) throw new Error(`${v.name} did not answer in 30 s`);
      await new Promise((r) => setTimeout(r, 1));
    }
    const startS = (performance.now() - t0) / 1000;
    const m = findMount(await readMountInfo(), dir);
    if (!m) throw new Error(`${dir} is not in mountinfo`);
    await Deno.writeTextFile(`/sys/class/bdi/${m.majorMinor}/read_ahead_kb`, String(v.readAheadKb));
    return await fn(dir, proc.child.pid, startS);
  } finally {
    await runToEnd("umount", [dir]);
    await proc.stop("SIGTERM", 20_000).catch(() => {});
    await runToEnd("umount", ["-l", dir]);
    await Deno.remove(dir).catch(() => {});
  }
}

/** Run the benchmark; resolves with the Markdown section. */
export async function benchEngines(options: {
  runs: number;
  sizeMiB: number;
  readAheadKb: number[];
  extra: { name: string; bin: string }[];
}): Promise<string> {
  const size = options.sizeMiB * MIB;
  const engines: { name: string; bin: string }[] = [{ name: "ours", bin: engineBin().bin! }];
  const upstream = upstreamBin();
  if (upstream.bin) engines.push({ name: "upstream", bin: upstream.bin });
  engines.push(...options.extra);
  const variants: Variant[] = engines.flatMap((e) =>
    options.readAheadKb.map((kb) => ({
      ...e,
      name: options.readAheadKb.length > 1 ? `${e.name} (ra ${kb})` : e.name,
      readAheadKb: kb,
    }))
  );
  const figures = new Map<string, Figures>(variants.map((v) => [v.name, {
    startS: [],
    readMBps: [],
    writeMBps: [],
    readCpuPerGiB: [],
    writeCpuPerGiB: [],
    idleRssMiB: [],
  }]));
  const sdk = { get: [] as number[], put: [] as number[] };
  const loadBefore = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  await using server = await startVersitygw();
  const s3 = await s3Client(server);
  const src = await Deno.makeTempFile({ prefix: "s3csi-engine-bench-" });
  try {
    await using bucket = await tempBucket(s3);
    const bytes = testBytes(size, 1);
    await Deno.writeFile(src, bytes);
    const gib = size / 2 ** 30;
    for (let run = 0; run < options.runs; run++) {
      // One object per variant and run, so each read is of an object its mount never read.
      for (const v of variants) {
        await s3.send(
          new PutObjectCommand({ Bucket: bucket.name, Key: key(v, run), Body: bytes }),
        );
      }
      let t = performance.now();
      await s3.send(new PutObjectCommand({ Bucket: bucket.name, Key: `sdk-${run}`, Body: bytes }));
      sdk.put.push(size / 1e6 / ((performance.now() - t) / 1000));
      t = performance.now();
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket.name, Key: `sdk-${run}` }));
      let n = 0;
      for await (const c of got.Body!.transformToWebStream() as ReadableStream<Uint8Array>) {
        n += c.length;
      }
      if (n !== size) throw new Error(`SDK GET returned ${n} bytes`);
      sdk.get.push(size / 1e6 / ((performance.now() - t) / 1000));
      await s3.send(new DeleteObjectCommand({ Bucket: bucket.name, Key: `sdk-${run}` }));
      const order = variants.map((_, i) => variants[(i + run) % variants.length]!);
      for (const v of order) {
        const f = figures.get(v.name)!;
        await withMount(v, server, bucket.name, key(v, run), async (dir, pid, startS) => {
          f.startS.push(startS);
          await new Promise((r) => setTimeout(r, 1000));
          f.idleRssMiB.push(await rssMiB(pid));
          let c0 = await cpu(pid);
          const readMs = await dd([`if=${dir}/${key(v, run)}`, "of=/dev/null"]);
          f.readCpuPerGiB.push(((await cpu(pid)) - c0) / gib);
          f.readMBps.push(size / 1e6 / (readMs / 1000));
          c0 = await cpu(pid);
          const writeMs = await dd([`if=${src}`, `of=${dir}/w-${key(v, run)}`, "conv=fsync"]);
          f.writeCpuPerGiB.push(((await cpu(pid)) - c0) / gib);
          f.writeMBps.push(size / 1e6 / (writeMs / 1000));
        });
        // Keep the server's disk small: each object is read or written once.
        for (const k of [key(v, run), `w-${key(v, run)}`]) {
          await s3.send(new DeleteObjectCommand({ Bucket: bucket.name, Key: k }));
        }
      }
    }
  } finally {
    s3.closeAll();
    await Deno.remove(src);
  }
  const loadAfter = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  return table(variants, figures, sdk, options, upstream.reason, `${loadBefore} / ${loadAfter}`);
}

function key(v: Variant, run: number): string {
  return `obj-${v.name.replace(/[^a-z0-9]+/gi, "-")}-${run}`;
}

function table(
  variants: Variant[],
  figures: Map<string, Figures>,
  sdk: { get: number[]; put: number[] },
  options: { runs: number; sizeMiB: number },
  upstreamReason: string | undefined,
  load: string,
): string {
  const m = (v: Variant, k: keyof Figures) => median(figures.get(v.name)![k]);
  const range = (v: Variant, k: keyof Figures, digits: number) => {
    const xs = figures.get(v.name)![k];
    return `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${
      Math.max(...xs).toFixed(digits)
    })`;
  };
  const [getMBps, putMBps] = [median(sdk.get), median(sdk.put)];
  const rows: [string, (v: Variant) => string][] = [
    ["start: exec to the first answered stat, s (min–max)", (v) => range(v, "startS", 3)],
    [`read ${options.sizeMiB} MiB, MB/s (min–max)`, (v) => range(v, "readMBps", 0)],
    [`write ${options.sizeMiB} MiB (fsync), MB/s (min–max)`, (v) => range(v, "writeMBps", 0)],
    ["engine CPU s per GiB read", (v) => m(v, "readCpuPerGiB").toFixed(2)],
    ["engine CPU s per GiB written", (v) => m(v, "writeCpuPerGiB").toFixed(2)],
    ["idle RSS once mounted, MiB", (v) => m(v, "idleRssMiB").toFixed(1)],
    [
      `read / SDK GET (${getMBps.toFixed(0)} MB/s)`,
      (v) => (m(v, "readMBps") / getMBps).toFixed(2),
    ],
    [
      `write / SDK PUT (${putMBps.toFixed(0)} MB/s)`,
      (v) => (m(v, "writeMBps") / putMBps).toFixed(2),
    ],
  ];
  const reference = (v: Variant) =>
    variants.find((u) => u.name.startsWith("upstream") && u.readAheadKb === v.readAheadKb);
  if (variants.some((v) => reference(v))) {
    const ratio = (v: Variant, k: keyof Figures, inverse = false) => {
      const u = reference(v);
      if (!u) return "";
      const r = inverse ? m(u, k) / m(v, k) : m(v, k) / m(u, k);
      return r.toFixed(2);
    };
    rows.push(
      ["vs upstream: read (≥ 1.00 is as fast)", (v) => ratio(v, "readMBps")],
      ["vs upstream: write", (v) => ratio(v, "writeMBps")],
      ["vs upstream: start (upstream's time / this one's)", (v) => ratio(v, "startS", true)],
      ["vs upstream: CPU per GiB read (this / upstream)", (v) => ratio(v, "readCpuPerGiB")],
    );
  }
  const lines = [
    `Engines alone (${options.runs} runs, medians; variants in rotating order; each mounted directly on a directory against one private versitygw; read_ahead_kb as given; load average ${load}).`,
    "",
    `| figure | ${variants.map((v) => `${v.name}`).join(" | ")} | goal |`,
    `|---|${variants.map(() => "---").join("|")}|---|`,
    ...rows.map(([name, f]) =>
      `| ${name} | ${variants.map(f).join(" | ")} | ${
        name.startsWith("vs upstream: read") || name.startsWith("vs upstream: write") ||
          name.startsWith("vs upstream: start")
          ? "≥ 1.00"
          : ""
      } |`
    ),
    "",
    "Binaries: " + variants.filter((v, i, a) => a.findIndex((u) => u.bin === v.bin) === i)
      .map((v) => `${v.name.replace(/ \(ra \d+\)$/, "")}: \`${v.bin}\``).join("; ") +
    ".",
  ];
  if (upstreamReason) lines.push("", `No upstream column: ${upstreamReason}.`);
  return lines.join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      runs: { type: "string", default: "10" },
      "size-mib": { type: "string", default: "256" },
      "read-ahead-kb": { type: "string", default: "256" },
      engine: { type: "string", multiple: true, default: [] },
    },
  });
  const reason = fuseReason() ?? versitygwReason();
  if (reason) {
    Deno.stdout.writeSync(new TextEncoder().encode(`bench_engine: cannot run: ${reason}\n`));
    Deno.exit(1);
  }
  const extra = values.engine.map((e) => {
    const i = e.indexOf("=");
    if (i < 1) throw new Error(`--engine ${e}: expected name=/path/to/mount-s3`);
    return { name: e.slice(0, i), bin: e.slice(i + 1) };
  });
  const text = await benchEngines({
    runs: Number(values.runs),
    sizeMiB: Number(values["size-mib"]),
    readAheadKb: values["read-ahead-kb"].split(",").map(Number),
    extra,
  });
  Deno.stdout.writeSync(new TextEncoder().encode(`${text}\n`));
}
