/**
 * Engine figures on one versitygw (run as root: `deno run -A tests/engine/bench.ts [runs]`):
 * 256 MiB written and read through our mount-s3 vs the SDK's PutObject/GetObject, and the engine's
 * idle RSS. Prints one JSON line per figure (medians of `runs`, default 3). A measurement, never
 * a test: the numbers depend on the machine and its load.
 *
 * @module
 */
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import {
  engineBin,
  fuseReason,
  mountEngine,
  s3Client,
  startVersitygw,
  tempBucket,
  testBytes,
  versitygwReason,
} from "./_engine.ts";

const MIB = 1024 * 1024;
const SIZE = 256 * MIB;
const runs = Number(Deno.args[0] ?? 3);

const reason = fuseReason() ?? versitygwReason();
if (reason) {
  Deno.stderr.writeSync(new TextEncoder().encode(`cannot run: ${reason}\n`));
  Deno.exit(3);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function mibps(bytes: number, ms: number): number {
  return Math.round((bytes / MIB) / (ms / 1000));
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function run(cmd: string, args: string[]): Promise<void> {
  const r = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  if (r.code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
  }
}

await using server = await startVersitygw();
const s3 = await s3Client(server);
const src = await Deno.makeTempFile({ prefix: "s3csi-engine-bench-" });
try {
  await using bucket = await tempBucket(s3);
  const bytes = testBytes(SIZE, 1);
  await Deno.writeFile(src, bytes);
  const figures: Record<string, number[]> = {
    mountWrite: [],
    sdkPut: [],
    mountRead: [],
    sdkGet: [],
    idleRssKiB: [],
  };
  for (let i = 0; i < runs; i++) {
    // Write: dd from a local file, fsync (the upload completes there), as a workload would.
    {
      await using m = await mountEngine({
        bucket: bucket.name,
        server,
        args: ["--allow-overwrite"],
      });
      await new Promise((r) => setTimeout(r, 2000));
      const status = await Deno.readTextFile(`/proc/${m.proc.child.pid}/status`);
      figures.idleRssKiB!.push(Number(/VmRSS:\s+(\d+)/.exec(status)![1]));
      figures.mountWrite!.push(
        await timed(() =>
          run("dd", [`if=${src}`, `of=${m.dir}/w${i}`, "bs=1M", "conv=fsync", "status=none"])
        ),
      );
    }
    figures.sdkPut!.push(
      await timed(async () => {
        await s3.send(new PutObjectCommand({ Bucket: bucket.name, Key: `s${i}`, Body: bytes }));
      }),
    );
    // Read: a fresh mount each time (no page cache), sequential 1 MiB reads to /dev/null.
    {
      await using m = await mountEngine({ bucket: bucket.name, server, args: ["--read-only"] });
      figures.mountRead!.push(
        await timed(() => run("dd", [`if=${m.dir}/s${i}`, "of=/dev/null", "bs=1M", "status=none"])),
      );
    }
    figures.sdkGet!.push(
      await timed(async () => {
        const r = await s3.send(new GetObjectCommand({ Bucket: bucket.name, Key: `s${i}` }));
        let n = 0;
        for await (const chunk of r.Body!.transformToWebStream() as ReadableStream<Uint8Array>) {
          n += chunk.length;
        }
        if (n !== SIZE) throw new Error(`GET returned ${n} bytes`);
      }),
    );
  }
  const w = median(figures.mountWrite!);
  const p = median(figures.sdkPut!);
  const r = median(figures.mountRead!);
  const g = median(figures.sdkGet!);
  const out = {
    engine: engineBin().bin,
    runs,
    load: (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" "),
    writeMiBps: {
      mount: mibps(SIZE, w),
      sdk: mibps(SIZE, p),
      ratio: Math.round((p / w) * 100) / 100,
    },
    readMiBps: {
      mount: mibps(SIZE, r),
      sdk: mibps(SIZE, g),
      ratio: Math.round((g / r) * 100) / 100,
    },
    idleRssMiB: Math.round(median(figures.idleRssKiB!) / 1024),
    raw: figures,
  };
  Deno.stdout.writeSync(new TextEncoder().encode(`${JSON.stringify(out)}\n`));
} finally {
  s3.closeAll();
  await Deno.remove(src);
}
