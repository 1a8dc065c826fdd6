/**
 * Helpers of the node-level fault tests: workloads played by shell processes on a published
 * target (a slow sequential reader, a slow sequential writer, files written and closed with `dd`),
 * a mounter run as PID 1 of its own PID namespace (so that, as in a container, killing it kills its
 * engine too), a NodePublishVolume issued from a child process (so that killing the node plugin
 * under it cannot take the test process down), and a leak check run after the harness is gone.
 *
 * @module
 */
import {
  AbortMultipartUploadCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import type { NodePublishVolumeRequest } from "../../../src/csi/gen/csi_types.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { unmountAllUnder } from "./sys_helpers.ts";
import { type Running, runToEnd, spawn, testOrSkip, waitFor } from "../../_helpers.ts";
import {
  ensureWorkDir,
  type Harness,
  mounterArgs,
  mounterEnvWithEngine,
  type S3Choice,
  skipReason,
  startHarness,
} from "./node_harness.ts";
import { emptyAndDeleteBucket } from "./s3_cleanup.ts";

const PUBLISH_ONCE = new URL("./publish_once.ts", import.meta.url).pathname;

function commandExists(name: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Print one measured figure (collected by the report). */
export function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`FAULT ${line}\n`));
}

/** Why the fault tests cannot run here (on the S3 server `s3`). */
export function faultSkipReason(s3: S3Choice = "rgw"): string | undefined {
  return skipReason({ s3 }) ??
    (commandExists("unshare") ? undefined : "needs unshare (util-linux)") ??
    (commandExists("ss") ? undefined : "needs ss (iproute2)");
}

/** Child processes a test started; all killed at the end. */
export class Children {
  readonly #all: Running[] = [];
  /** Track `r`. */
  add(r: Running): Running {
    this.#all.push(r);
    return r;
  }
  /** SIGKILL them all (bounded). */
  async killAll(): Promise<void> {
    for (const r of this.#all) await r.stop("SIGKILL", 5_000).catch(() => {});
  }
}

/**
 * A node fault test: its own harness and bucket; at the end (even on failure) children killed,
 * harness disposed, then no mount under the kubelet root, no engine serving the bucket, no bucket
 * (on RGW; a versitygw of the harness is purged with it). `s3`: the harness's server, and so its
 * engine (RGW: rclone; versitygw: mount-s3).
 */
export function faultTest(
  name: string,
  fn: (h: Harness, children: Children) => Promise<void>,
  options: { s3?: S3Choice } = {},
): void {
  testOrSkip(faultSkipReason(options.s3), {
    name,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const h = await startHarness({
        bucket: `faults-${crypto.randomUUID().slice(0, 8)}`,
        ...(options.s3 ? { s3: options.s3 } : {}),
      });
      const children = new Children();
      let failure: unknown;
      try {
        await fn(h, children);
      } catch (err) {
        failure = err;
      }
      const leaks: string[] = [];
      // The harness destroys its S3 client: the checks after it use their own.
      const s3 = new S3Client({
        endpoint: h.rgw.S3_ENDPOINT!,
        region: h.rgw.AWS_REGION ?? "us-east-1",
        forcePathStyle: true,
        credentials: {
          accessKeyId: h.rgw.AWS_ACCESS_KEY_ID!,
          secretAccessKey: h.rgw.AWS_SECRET_ACCESS_KEY!,
        },
      });
      try {
        await children.killAll();
        await abortUploads(h.s3, h.bucket).catch(() => {});
        await Promise.resolve(h[Symbol.asyncDispose]()).catch((e: unknown) =>
          leaks.push(`dispose: ${e}`)
        );
        const mounts = (await readMountInfo()).filter((m) => m.mountPoint.startsWith(h.root));
        if (mounts.length) {
          leaks.push(`mounts left: ${mounts.map((m) => m.mountPoint).join(", ")}`);
          await unmountAllUnder(h.root);
        }
        const engines = await strays(h.bucket);
        if (engines.length) {
          leaks.push(`engine processes left: ${engines.join(", ")}`);
          for (const pid of engines) Deno.kill(pid, "SIGKILL");
        }
        if (h.s3Server === "rgw" && await bucketExists(s3, h.bucket)) {
          // The harness's delete failed (e.g. an upload aborted by the fault): retry once here.
          await abortUploads(s3, h.bucket).catch(() => {});
          await emptyAndDeleteBucket(s3, h.bucket).catch((e) =>
            leaks.push(`bucket ${h.bucket} left: ${e}`)
          );
        }
      } finally {
        s3.destroy();
      }
      if (failure) throw failure;
      if (leaks.length) throw new Error(`leaks after the test: ${leaks.join("; ")}`);
    },
  });
}

/**
 * Pids of engines still serving the bucket (rclone's `s3:<bucket>` argument, mount-s3's
 * `mount-s3 <bucket> /dev/fd/N`).
 */
async function strays(bucket: string): Promise<number[]> {
  const pids = new Set<number>();
  for (const pattern of [`s3:${bucket}`, `mount-s3 ${bucket} /dev/fd/`]) {
    const r = await runToEnd("pgrep", ["-f", pattern]);
    for (const p of r.stdout.split("\n").filter(Boolean)) pids.add(Number(p));
  }
  return [...pids];
}

async function bucketExists(s3: S3Client, bucket: string): Promise<boolean> {
  return await s3.send(new HeadBucketCommand({ Bucket: bucket }), {
    abortSignal: AbortSignal.timeout(10_000),
  }).then(() => true, (e) => e?.$metadata?.httpStatusCode !== 404);
}

async function abortUploads(s3: S3Client, bucket: string): Promise<void> {
  const abortSignal = AbortSignal.timeout(20_000);
  const list = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }), { abortSignal });
  for (const u of list.Uploads ?? []) {
    await s3.send(
      new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.Key!, UploadId: u.UploadId! }),
      { abortSignal },
    );
  }
}

const SHELL_ENV = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LC_ALL: "C" };

/** A workload reading `file` 256 KiB at a time, slowly; prints one line per read. */
export function slowReader(file: string): Running {
  return spawn("bash", [
    "-c",
    `set -o pipefail; exec 3<"$1"
     while :; do
       n=$(dd bs=262144 count=1 status=none <&3 | wc -c) || exit 3
       [ "$n" -eq 0 ] && exit 0
       echo "$n"; sleep 0.05
     done`,
    "reader",
    file,
  ], { env: SHELL_ENV });
}

/**
 * A workload appending 256 KiB at a time to `file`, slowly, from **one** process and one open file
 * (rclone's streaming writes refuse writes to the handle from another process: EBADF); prints a
 * line per block handed to the writer.
 */
export function slowWriter(file: string): Running {
  return spawn("bash", [
    "-c",
    `set -o pipefail; exec 3>&1
     (while :; do head -c 262144 /dev/zero || exit; echo w >&3; sleep 0.05; done) |
       dd of="$1" bs=262144 iflag=fullblock status=none`,
    "writer",
    file,
  ], { env: SHELL_ENV });
}

/** Wait (bounded) for a workload to print `lines` lines. */
export async function waitProgress(w: Running, lines: number, what: string): Promise<void> {
  await waitFor(`${what} to make progress`, () => {
    if (w.stdout().split("\n").filter(Boolean).length >= lines) return true;
    if (w.stderr()) throw new Error(`${what} failed before the fault: ${w.stderr()}`);
    return false;
  }, { timeoutMs: 30_000 });
}

/** Wait (bounded) for a workload to exit; its code, stderr and the time it took. */
export async function waitExit(
  w: Running,
  timeoutMs: number,
): Promise<{ code: number; stderr: string; ms: number }> {
  const t0 = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const code = await Promise.race([
    w.child.status.then((s) => s.code),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the workload hung: no exit within ${timeoutMs} ms of the fault`)),
        timeoutMs,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  await new Promise((r) => setTimeout(r, 50)); // let the stderr pump drain
  return { code, stderr: w.stderr().trim(), ms: Math.round(performance.now() - t0) };
}

/** Random-ish content of `size` bytes (a counter pattern salted with `seed`). */
export function content(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  crypto.getRandomValues(out.subarray(0, Math.min(size, 65536)));
  for (let i = 65536; i < size; i++) out[i] = (out[i - 65536]! + seed + (i >> 16)) & 0xff;
  return out;
}

/** sha-256 in hex. */
export async function sha256(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Write files through the mount as a workload does (`dd`, one open/close each); resolves with
 * their key → sha256 once every `dd` has exited 0 (the files are closed).
 */
export async function writeClosedFiles(
  target: string,
  files: Record<string, number>,
  seed: number,
): Promise<Map<string, string>> {
  const staging = await Deno.makeTempDir({ prefix: "s3csi-faults-" });
  const out = new Map<string, string>();
  try {
    for (const [name, size] of Object.entries(files)) {
      const bytes = content(size, seed);
      await Deno.writeFile(`${staging}/${name}`, bytes);
      const r = await runToEnd("dd", [
        `if=${staging}/${name}`,
        `of=${target}/${name}`,
        "bs=1M",
        "status=none",
      ], SHELL_ENV);
      if (r.code !== 0) throw new Error(`dd to ${target}/${name} failed: ${r.stderr}`);
      out.set(name, await sha256(bytes));
    }
  } finally {
    await Deno.remove(staging, { recursive: true }).catch(() => {});
  }
  return out;
}

/** Assert through the S3 API that each key has the expected sha256. */
export async function assertInS3(
  s3: S3Client,
  bucket: string,
  expected: Map<string, string>,
): Promise<void> {
  for (const [key, sum] of expected) {
    const obj = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }), {
      abortSignal: AbortSignal.timeout(30_000),
    }).catch((e) => {
      throw new Error(`"${key}", closed before the fault, is not in S3: ${e}`);
    });
    const got = await sha256(await obj.Body!.transformToByteArray());
    if (got !== sum) throw new Error(`"${key}" in S3 differs from what was written`);
  }
}

/** Upload an object directly (for readers). */
export async function putObject(
  s3: S3Client,
  bucket: string,
  key: string,
  size: number,
): Promise<void> {
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: content(size, 7) }), {
    abortSignal: AbortSignal.timeout(60_000),
  });
}

/**
 * The mounter as the Mountpoint Pod's container runs it: PID 1 of a PID namespace (`unshare`), so
 * that when it dies the kernel kills its engine too. `innerPid` is the mounter's host pid. With
 * `waitSocket: false` it does not wait for `mount.sock`: a publish already waiting for it may take
 * it (the mounter removes it) within milliseconds.
 */
export async function startNsMounter(
  commDir: string,
  { waitSocket = true, env = {} }: { waitSocket?: boolean; env?: Record<string, string> } = {},
): Promise<{ running: Running; innerPid: number }> {
  ensureWorkDir(commDir);
  const running = spawn("unshare", [
    "--pid",
    "--fork",
    "--kill-child",
    "setpriv",
    ...mounterArgs(commDir),
  ], {
    env: { ...mounterEnvWithEngine(true), ...env },
  });
  if (waitSocket) {
    await waitFor(
      "the mounter socket",
      () => Deno.stat(`${commDir}/mount.sock`).then(() => true, () => false),
      { timeoutMs: 60_000 },
    ).catch((e) => {
      throw new Error(`${e.message}; mounter log: ${running.stderr().slice(-2000)}`);
    });
  }
  const innerPid = await waitFor("the namespaced mounter's pid", async () => {
    const r = await runToEnd("pgrep", ["-P", String(running.child.pid)]);
    return Number(r.stdout.trim().split("\n")[0]) || undefined;
  }, { timeoutMs: 10_000 });
  return { running, innerPid };
}

/** NodePublishVolume from a child process (the test process keeps no channel to the plugin). */
export function publishInChild(socket: string, req: NodePublishVolumeRequest): Running {
  return spawn(Deno.execPath(), [
    "run",
    "-A",
    "--quiet",
    PUBLISH_ONCE,
    socket,
    JSON.stringify(req),
  ], { env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: "/root" } });
}
