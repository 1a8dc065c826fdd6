/**
 * Node plugin benchmark (root, real FUSE, RGW from tests/testbed/services/s3/rgw_start.sh):
 *
 * 1. NodePublishVolume latency, p50/p99 over N publishes:
 *    a. new source mount on an already Running Mountpoint Pod (fd passing + engine start + ready);
 *    b. a publish that shares an existing source mount (bind only).
 * 2. Sequential write and read of one object through the mount vs direct @aws-sdk/client-s3
 *    PUT/GET on the same server in the same run.
 * 3. Idle RSS of the node plugin and of one mounter (plus its engine).
 *
 * Usage: `deno run -A scripts/bench_node.ts [--publishes=50] [--size-mib=256]`
 *
 * @module
 */
import { parseArgs } from "node:util";
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { PODS } from "../src/kube/resources.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../src/mppod/labels.ts";
import { kubeletMkdirParent, skipReason, startHarness } from "../tests/node/_harness.ts";
import { runToEnd } from "../tests/_helpers.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    publishes: { type: "string", default: "50" },
    "size-mib": { type: "string", default: "256" },
    "read-ahead-kb": { type: "string", default: "" },
  },
});
const N = Number(values.publishes);
const SIZE = Number(values["size-mib"]) * 1024 * 1024;
const out = (s: string) => Deno.stdout.writeSync(new TextEncoder().encode(`${s}\n`));

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

async function rssMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

async function childPids(pid: number): Promise<number[]> {
  const r = await runToEnd("pgrep", ["-P", String(pid)]);
  return r.stdout.trim().split("\n").filter(Boolean).map(Number);
}

async function main(): Promise<number> {
  const reason = skipReason();
  if (reason) {
    out(`bench_node: cannot run: ${reason}`);
    return 1;
  }
  await using h = await startHarness({
    nodeArgs: values["read-ahead-kb"] ? [`--read-ahead-kb=${values["read-ahead-kb"]}`] : [],
  });
  const rows: [string, string][] = [];

  // 1a. New source mount on a Running Mountpoint Pod.
  const fresh: number[] = [];
  for (let i = 0; i < N; i++) {
    const mp = await h.mountpointPod(`mp-new-${i}`);
    const pv = `pv-new-${i}`;
    await h.assign(pv, `vol-${pv}`, mp.name, [`uid-new-${i}`]);
    const target = h.target(`uid-new-${i}`, pv);
    await kubeletMkdirParent(target);
    const t0 = performance.now();
    await h.csi.node.nodePublishVolume(h.publishRequest(`uid-new-${i}`, pv));
    fresh.push(performance.now() - t0);
    if (i === 0) {
      await new Promise((r) => setTimeout(r, 2000));
      const node = await rssMiB(h.node.child.pid);
      const mounter = await rssMiB(mp.mounter.child.pid);
      const engines = await childPids(mp.mounter.child.pid);
      const engine = engines.length ? await rssMiB(engines[0]!) : 0;
      rows.push(["idle RSS node plugin (MiB)", node.toFixed(0)]);
      rows.push(["idle RSS mounter (MiB, Deno)", mounter.toFixed(0)]);
      rows.push(["idle RSS engine (MiB, rclone)", engine.toFixed(0)]);
    }
    await h.csi.node.nodeUnpublishVolume({ volumeId: `vol-${pv}`, targetPath: target });
    await h.kube.patch(PODS, mp.name, "mount-s3", {
      metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
    }, { type: "merge" });
    await mp.mounter.child.status;
  }
  const steps = [
    ...h.node.stderr().matchAll(
      /check\+prepare (\d+) ms, mount\+send (\d+) ms, engine ready (\d+) ms/g,
    ),
  ].map((m) => [Number(m[1]), Number(m[2]), Number(m[3])]);
  const med = (i: number) => pct(steps.map((s) => s[i]!), 50).toFixed(0);
  rows.push([
    `publish, new source mount: p50 / p99 ms (n=${N})`,
    `${pct(fresh, 50).toFixed(1)} / ${pct(fresh, 99).toFixed(1)}`,
  ]);
  rows.push([
    "  of which (p50): bucket check+prepare / mount+send / engine ready ms",
    `${med(0)} / ${med(1)} / ${med(2)}`,
  ]);

  // 1b. Shared source mount: bind only.
  const shared = await h.mountpointPod("mp-shared");
  const uids = Array.from({ length: N + 1 }, (_, i) => `uid-sh-${i}`);
  await h.assign("pv-sh", "vol-pv-sh", shared.name, uids);
  await kubeletMkdirParent(h.target(uids[0]!, "pv-sh"));
  await h.csi.node.nodePublishVolume(h.publishRequest(uids[0]!, "pv-sh")); // creates the source
  const bind: number[] = [];
  for (const uid of uids.slice(1)) {
    await kubeletMkdirParent(h.target(uid, "pv-sh"));
    const t0 = performance.now();
    await h.csi.node.nodePublishVolume(h.publishRequest(uid, "pv-sh"));
    bind.push(performance.now() - t0);
  }
  rows.push([
    `publish, shared source mount: p50 / p99 ms (n=${N})`,
    `${pct(bind, 50).toFixed(1)} / ${pct(bind, 99).toFixed(1)}`,
  ]);

  // 2. Throughput.
  const target = h.target(uids[0]!, "pv-sh");
  const data = new Uint8Array(SIZE);
  for (let i = 0; i < SIZE; i += 4096) data[i] = i & 0xff;
  const mib = SIZE / 1024 / 1024;
  const mbps = (ms: number) => (SIZE / 1e6 / (ms / 1000));

  let t0 = performance.now();
  await h.s3.send(new PutObjectCommand({ Bucket: h.bucket, Key: "direct.bin", Body: data }));
  const sdkPut = performance.now() - t0;
  t0 = performance.now();
  const got = await h.s3.send(new GetObjectCommand({ Bucket: h.bucket, Key: "direct.bin" }));
  let n = 0;
  for await (const c of got.Body!.transformToWebStream()) n += (c as Uint8Array).length;
  const sdkGet = performance.now() - t0;
  if (n !== SIZE) throw new Error(`SDK GET returned ${n} bytes`);

  // dd, like a workload would (bs=1M sequential); /dev/zero content, S3 does not compress.
  const dd = async (args: string[]) => {
    const t = performance.now();
    const r = await runToEnd("dd", [...args, "bs=1M", `count=${mib}`]);
    if (r.code !== 0) throw new Error(`dd ${args.join(" ")} failed: ${r.stderr}`);
    return performance.now() - t;
  };
  const fuseWrite = await dd(["if=/dev/zero", `of=${target}/mount.bin`]);
  // Read an object the mount has not cached (written by the SDK).
  const fuseRead = await dd([`if=${target}/direct.bin`, "of=/dev/null"]);
  rows.push([
    `write ${mib} MiB: mount / SDK PUT MB/s (ratio)`,
    `${mbps(fuseWrite).toFixed(0)} / ${mbps(sdkPut).toFixed(0)} (${
      (sdkPut / fuseWrite).toFixed(2)
    })`,
  ]);
  rows.push([
    `read ${mib} MiB: mount / SDK GET MB/s (ratio)`,
    `${mbps(fuseRead).toFixed(0)} / ${mbps(sdkGet).toFixed(0)} (${(sdkGet / fuseRead).toFixed(2)})`,
  ]);

  // The engine alone, without FUSE (rclone rcat / cat on the same server): the ceiling of the
  // mount's throughput with this engine.
  const rcloneEnv = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: "/tmp",
    AWS_CA_BUNDLE: "", // set in this environment; rclone's S3 client refuses it
    RCLONE_CONFIG_S3_TYPE: "s3",
    RCLONE_CONFIG_S3_PROVIDER: "Other",
    RCLONE_CONFIG_S3_ENDPOINT: h.rgw.S3_ENDPOINT!,
    RCLONE_CONFIG_S3_REGION: h.rgw.AWS_REGION ?? "us-east-1",
    RCLONE_CONFIG_S3_FORCE_PATH_STYLE: "true",
    RCLONE_CONFIG_S3_NO_CHECK_BUCKET: "true",
    RCLONE_CONFIG_S3_ACCESS_KEY_ID: h.rgw.AWS_ACCESS_KEY_ID!,
    RCLONE_CONFIG_S3_SECRET_ACCESS_KEY: h.rgw.AWS_SECRET_ACCESS_KEY!,
  };
  const sh = async (cmd: string) => {
    const t = performance.now();
    const r = await runToEnd("sh", ["-c", cmd], rcloneEnv);
    if (r.code !== 0) throw new Error(`${cmd}: ${r.stderr}`);
    return performance.now() - t;
  };
  const rcat = await sh(
    `dd if=/dev/zero bs=1M count=${mib} 2>/dev/null | rclone rcat --config /dev/null s3:${h.bucket}/rcat.bin`,
  );
  const rcatRead = await sh(`rclone cat --config /dev/null s3:${h.bucket}/direct.bin > /dev/null`);
  rows.push([
    `rclone alone (no FUSE): rcat / cat MB/s`,
    `${mbps(rcat).toFixed(0)} / ${mbps(rcatRead).toFixed(0)}`,
  ]);

  /** The goal for a metric row, when it has one. */
  const goalOf = (metric: string): string => {
    if (metric.startsWith("publish, new source mount")) return "p50 ≤ 100 / p99 ≤ 300 ms";
    if (metric.startsWith("publish, shared source mount")) return "p50 ≤ 20 ms";
    if (metric.startsWith("write ")) return "ratio ≥ 0.80";
    if (metric.startsWith("read ")) return "ratio ≥ 0.90";
    return "";
  };
  out(
    `\nNode plugin benchmark (read_ahead_kb=${
      values["read-ahead-kb"] || "node default"
    }, engine rclone mount2, RGW ${h.rgw.S3_ENDPOINT})`,
  );
  const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  out(`load average during the run: ${load} (2 vCPU shared with other work)`);
  out("");
  out("| metric | value | goal |");
  out("|---|---|---|");
  for (const [k, v] of rows) out(`| ${k.trim()} | ${v} | ${goalOf(k)} |`);
  return 0;
}

if (import.meta.main) Deno.exit(await main());
