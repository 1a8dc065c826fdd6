/**
 * Harness of the engine tier: our `mount-s3` (src/engine, built by scripts/build_engine.sh) run
 * directly on a directory or a pre-mounted `/dev/fd/N`, against real S3 servers: versitygw
 * (started per test file by tests/testbed/services/versitygw/start.sh on a free port, HTTP or
 * HTTPS with a private CA) and Ceph RGW (when tests/testbed/services/s3/rgw_start.sh runs; env
 * file `$S3_STATE_DIR/env` or `/var/tmp/s3csi-rgw/env`).
 *
 * The engine gets exactly the environment a test gives it (nothing inherited).
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  CreateBucketCommand,
  GetObjectCommand,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { createHash } from "node:crypto";
import { emptyAndDeleteBucket } from "./s3_cleanup.ts";
import { freePort, ROOT, type Running, spawn, testOrSkip, waitFor } from "../../_helpers.ts";
import { S3ClientFactory } from "../../../src/s3/client_factory.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";

/** Environment lines of a test S3 server (the keys rgw_start.sh prints). */
export type ServerEnv = Record<string, string>;

/** An S3 server for a test file. */
export interface Server extends AsyncDisposable {
  readonly name: "versitygw" | "rgw";
  readonly env: ServerEnv;
  /** PEM of the private CA (HTTPS versitygw only). */
  readonly caPem?: string;
  /** Path of the CA file (HTTPS versitygw only). */
  readonly caFile?: string;
}

const VGW_DIR = `${ROOT}tests/testbed/services/versitygw`;
const RGW_ENVS = [
  ...(Deno.env.get("S3_STATE_DIR") ? [`${Deno.env.get("S3_STATE_DIR")}/env`] : []),
  "/var/tmp/s3csi-rgw/env",
];

function run(cmd: string, args: string[]) {
  const out = new Deno.Command(cmd, { args, stdin: "null", stdout: "piped", stderr: "piped" })
    .outputSync();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

function lastLine(text: string): string {
  return text.trim().split("\n").at(-1) ?? "";
}

function parseEnv(text: string): ServerEnv {
  const env: ServerEnv = {};
  for (const line of text.split("\n")) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

let engine: { bin?: string; supervisor?: string; reason?: string } | undefined;

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * Our mount-s3 binary and, beside it, the Mountpoint Pod's supervisor (`s3-csi-supervisor`, which
 * every mounter execs into): `$S3CSI_ENGINE_BIN`, else the cached build (never builds here).
 */
export function engineBin(): { bin?: string; supervisor?: string; reason?: string } {
  if (engine) return engine;
  const fromEnv = Deno.env.get("S3CSI_ENGINE_BIN");
  let bin: string | undefined;
  if (fromEnv) {
    if (!isFile(fromEnv)) return engine = { reason: `S3CSI_ENGINE_BIN=${fromEnv} is not a file` };
    bin = fromEnv;
  } else {
    const r = run("bash", [`${ROOT}scripts/build_engine.sh`, "--no-build"]);
    const m = /^ENGINE_BIN=(.+)$/.exec(lastLine(r.stdout));
    if (r.code !== 0 || !m) {
      return engine = {
        reason: `no mount-s3 built: run scripts/build_engine.sh (${lastLine(r.stderr)})`,
      };
    }
    bin = m[1]!;
  }
  const supervisor = bin.replace(/[^/]+$/, "s3-csi-supervisor");
  engine = isFile(supervisor)
    ? { bin, supervisor }
    : { reason: `no s3-csi-supervisor beside ${bin}: rebuild with scripts/build_engine.sh` };
  return engine;
}

/**
 * Why the crate's own (cargo) tests cannot run here: no toolchain that can build it, as
 * `build_engine.sh --toolchain` judges (the script that then runs them).
 */
export function cargoReason(): string | undefined {
  const r = run("bash", [`${ROOT}scripts/build_engine.sh`, "--toolchain"]);
  return r.code === 0
    ? undefined
    : lastLine(r.stderr) || `build_engine.sh --toolchain: exit ${r.code}`;
}

/** Why FUSE tests cannot run here. */
export function fuseReason(): string | undefined {
  if (Deno.uid() !== 0) return "needs root";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  return engineBin().reason;
}

let vgw: { reason?: string } | undefined;

/** Why versitygw cannot run here (builds it when missing: ~1-2 min once). */
export function versitygwReason(): string | undefined {
  vgw ??= (() => {
    const r = run("bash", [`${VGW_DIR}/build.sh`]);
    return r.code === 0 ? {} : { reason: `versitygw: ${lastLine(r.stderr)}` };
  })();
  return vgw.reason;
}

/** The running RGW's env, or undefined. */
export function rgwEnv(): ServerEnv | undefined {
  for (const path of RGW_ENVS) {
    try {
      const env = parseEnv(Deno.readTextFileSync(path));
      if (env.S3_ENDPOINT && env.AWS_ACCESS_KEY_ID) return env;
    } catch {
      // next
    }
  }
  return undefined;
}

/** Why RGW tests cannot run. */
export function rgwReason(): string | undefined {
  return rgwEnv()
    ? undefined
    : `needs RGW: run tests/testbed/services/s3/rgw_start.sh (no env file in ${
      RGW_ENVS.join(", ")
    })`;
}

/** Start a private versitygw (own port and state dir), stopped and purged on dispose. */
export async function startVersitygw(options: { tls?: boolean } = {}): Promise<Server> {
  const stateDir = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "s3csi-engine-vgw-" });
  await Deno.remove(stateDir);
  const env = {
    VGW_STATE_DIR: stateDir,
    VGW_PORT: String(freePort()),
    VGW_TLS: options.tls ? "1" : "0",
  };
  const stop = () =>
    new Deno.Command("bash", { args: [`${VGW_DIR}/stop.sh`, "--purge"], env, stderr: "null" })
      .output();
  const r = await new Deno.Command("bash", {
    args: [`${VGW_DIR}/start.sh`],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (r.code !== 0) {
    await stop();
    throw new Error(`versitygw start failed (${r.code}): ${new TextDecoder().decode(r.stderr)}`);
  }
  const serverEnv = parseEnv(new TextDecoder().decode(r.stdout));
  const caFile = serverEnv.S3_CA_BUNDLE;
  return {
    name: "versitygw",
    env: serverEnv,
    ...(caFile ? { caFile, caPem: await Deno.readTextFile(caFile) } : {}),
    [Symbol.asyncDispose]: async () => void await stop(),
  };
}

/** The running RGW as a server (not stopped on dispose: the test runner owns it). */
export function rgwServer(): Server {
  return { name: "rgw", env: rgwEnv()!, [Symbol.asyncDispose]: () => Promise.resolve() };
}

/** An SDK client for a server; `closeAll()` when done. */
export async function s3Client(
  server: Server,
  credentials?: { accessKeyId: string; secretAccessKey: string },
): Promise<S3Client & { closeAll(): void }> {
  const factory = new S3ClientFactory({
    endpoint: server.env.S3_ENDPOINT,
    forcePathStyle: true,
    ...(server.caPem ? { caBundlePem: server.caPem } : {}),
    requestTimeoutMs: 300_000,
    maxAttempts: 3,
  });
  const client = await factory.create({
    region: server.env.AWS_REGION ?? "us-east-1",
    credentials: credentials ?? {
      accessKeyId: server.env.AWS_ACCESS_KEY_ID!,
      secretAccessKey: server.env.AWS_SECRET_ACCESS_KEY!,
    },
  });
  return Object.assign(client, {
    closeAll() {
      client.destroy();
      factory.close();
    },
  });
}

let bucketCounter = 0;

/** A fresh bucket, emptied and deleted on dispose. */
export async function tempBucket(s3: S3Client): Promise<{ name: string } & AsyncDisposable> {
  const name = `engine-${Date.now().toString(36)}-${Deno.pid}-${bucketCounter++}`;
  await s3.send(new CreateBucketCommand({ Bucket: name }));
  return {
    name,
    [Symbol.asyncDispose]: () => emptyAndDeleteBucket(s3, name).catch(() => {}),
  };
}

/** The environment our mount-s3 gets for a server (credentials as env vars, like the SDKs). */
export function engineEnv(
  server: Server,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PATH: "/usr/bin:/bin",
    HOME: "/tmp",
    AWS_ACCESS_KEY_ID: server.env.AWS_ACCESS_KEY_ID!,
    AWS_SECRET_ACCESS_KEY: server.env.AWS_SECRET_ACCESS_KEY!,
    AWS_REGION: server.env.AWS_REGION ?? "us-east-1",
    AWS_ENDPOINT_URL: server.env.S3_ENDPOINT!,
    // No EC2 instance metadata lookups on a test machine.
    AWS_EC2_METADATA_DISABLED: "true",
    ...extra,
  };
}

/** A running mount-s3. */
export interface Mounted extends AsyncDisposable {
  /** Mount point (a directory). */
  readonly dir: string;
  readonly proc: Running;
  /** Unmount and wait for mount-s3 to exit; returns its exit code. */
  unmount(): Promise<number>;
}

async function isMounted(dir: string): Promise<boolean> {
  return (await readMountInfo()).some((m) => m.mountPoint === dir);
}

function umount(dir: string, lazy = false): void {
  new Deno.Command("umount", { args: lazy ? ["-l", dir] : [dir], stderr: "null" }).outputSync();
}

/**
 * Run mount-s3 and wait until it reports the mount. `mountPoint` defaults to a new directory;
 * pass `/dev/fd/N` (with `dir`) to serve a pre-mounted FUSE fd.
 * @throws when it exits first (message: exit code and output)
 */
export async function mountEngine(options: {
  bucket: string;
  server: Server;
  args?: string[];
  /** Added to {@link engineEnv}. */
  env?: Record<string, string>;
  /** The whole environment instead of {@link engineEnv}. */
  fullEnv?: Record<string, string>;
  mountPoint?: string;
  dir?: string;
  timeoutMs?: number;
}): Promise<Mounted> {
  const dir = options.dir ?? await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
  const bin = engineBin().bin!;
  const proc = spawn(bin, [
    options.bucket,
    options.mountPoint ?? dir,
    "--foreground",
    "--force-path-style",
    ...(options.args ?? []),
  ], { env: options.fullEnv ?? engineEnv(options.server, options.env), clearEnv: true });
  let code: number | undefined;
  proc.child.status.then((s) => (code = s.code));
  try {
    await waitFor(
      "mount-s3 to mount",
      () => code !== undefined || proc.stdout().includes(" is mounted at "),
      { timeoutMs: options.timeoutMs ?? 60_000, intervalMs: 25 },
    );
  } catch (err) {
    await proc.stop("SIGKILL").catch(() => {});
    throw new Error(`${err}; stdout: ${proc.stdout()} stderr: ${proc.stderr()}`);
  }
  if (code !== undefined) {
    await proc.stop().catch(() => {});
    if (!options.dir) await Deno.remove(dir).catch(() => {});
    throw new Error(`mount-s3 exited with ${code}: ${proc.stderr().trim()}`);
  }
  let result: number | undefined;
  const unmount = async () => {
    if (result !== undefined) return result;
    if (await isMounted(dir)) umount(dir);
    let exit: number;
    try {
      exit = await Promise.race([
        proc.child.status.then((s) => s.code),
        new Promise<number>((_, reject) =>
          setTimeout(() => reject(new Error("mount-s3 did not exit after umount")), 20_000)
        ),
      ]);
    } catch {
      exit = await proc.stop("SIGTERM", 10_000).catch(() => -1);
    }
    if (await isMounted(dir)) umount(dir, true);
    if (!options.dir) await Deno.remove(dir).catch(() => {});
    result = exit;
    return exit;
  };
  return { dir, proc, unmount, [Symbol.asyncDispose]: async () => void await unmount() };
}

/** Run mount-s3 expecting it to end by itself; returns exit code and output. */
export async function failingEngine(options: {
  args: string[];
  env?: Record<string, string>;
  timeoutMs?: number;
}): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = spawn(engineBin().bin!, options.args, {
    env: options.env ?? { PATH: "/usr/bin:/bin" },
    clearEnv: true,
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const code = await Promise.race([
    proc.child.status.then((s) => s.code),
    new Promise<number>((
      resolve,
    ) => (timer = setTimeout(() => resolve(-1), options.timeoutMs ?? 60_000))),
  ]);
  clearTimeout(timer);
  if (code === -1) await proc.stop("SIGKILL").catch(() => {});
  await proc.stop().catch(() => {});
  return { code, stdout: proc.stdout(), stderr: proc.stderr() };
}

/** Deterministic pseudo-random bytes (xorshift), so failures are reproducible. */
export function testBytes(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let x = (seed * 2654435761) >>> 0 || 1;
  let i = 0;
  for (; i + 4 <= size; i += 4) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    view.setUint32(i, x, true);
  }
  for (; i < size; i++) out[i] = (x >>> ((i % 4) * 8)) & 0xff;
  return out;
}

/** sha256 hex of bytes. */
export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** sha256 hex of an object's body, streamed. */
export async function objectSha256(s3: S3Client, bucket: string, key: string): Promise<string> {
  const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  const hash = createHash("sha256");
  for await (const chunk of r.Body!.transformToWebStream() as ReadableStream<Uint8Array>) {
    hash.update(chunk);
  }
  return hash.digest("hex");
}

/**
 * Run `fn` with a server from `start`, its SDK client and a temporary bucket (removed
 * afterwards); nothing may be left mounted.
 */
export async function withBucket(
  start: () => Promise<Server>,
  fn: (server: Server, s3: S3Client, bucket: string) => Promise<void>,
): Promise<void> {
  await using server = await start();
  const s3 = await s3Client(server);
  try {
    await using bucket = await tempBucket(s3);
    await fn(server, s3, bucket.name);
  } finally {
    s3.closeAll();
    await assertNoLeftoverMounts();
  }
}

const MIB = 1024 * 1024;

/** An object of {@link sdkObjects}. */
export interface TestObject {
  readonly key: string;
  readonly bytes: Uint8Array;
}

/**
 * Upload, with the SDK, objects of 0 B, 1 B, 5 MiB+1 and 40 MiB (the last two in subdirectories)
 * for the tests that read them through a mount; {@link assertReadThrough} checks them.
 */
export async function putSdkObjects(s3: S3Client, bucket: string): Promise<TestObject[]> {
  const objects = [
    { key: "empty", bytes: testBytes(0, 1) },
    { key: "one", bytes: testBytes(1, 2) },
    { key: "dir/five-mib-plus-one", bytes: testBytes(5 * MIB + 1, 3) },
    { key: "dir/sub/forty-mib", bytes: testBytes(40 * MIB, 4) },
  ];
  for (const o of objects) {
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: o.key, Body: o.bytes }));
  }
  return objects;
}

/**
 * Check that `objects` ({@link putSdkObjects}) read through the mount at `dir` byte-identical:
 * each whole, and 4 KiB from the middle of the largest, as a reader seeking would ask.
 */
export async function assertReadThrough(dir: string, objects: TestObject[]): Promise<void> {
  for (const o of objects) {
    assert.equal((await Deno.stat(`${dir}/${o.key}`)).size, o.bytes.length, o.key);
    assert.equal(await fileSha256(`${dir}/${o.key}`), sha256(o.bytes), o.key);
  }
  const largest = objects.reduce((a, b) => (b.bytes.length > a.bytes.length ? b : a));
  const at = 17 * MIB + 3;
  using f = await Deno.open(`${dir}/${largest.key}`);
  await f.seek(at, Deno.SeekMode.Start);
  const buf = new Uint8Array(4096);
  let n = 0;
  while (n < buf.length) n += (await f.read(buf.subarray(n))) ?? buf.length;
  assert.deepEqual(buf, largest.bytes.subarray(at, at + buf.length));
}

/**
 * Write `bytes` to `path` in 1 MiB chunks (sequential, as applications do), fsync (Mountpoint
 * completes the upload there and reports its errors), then close.
 *
 * Synchronous calls on purpose: Deno's async `write()` runs on a duplicate of the fd and closes
 * it afterwards; each such close is a FUSE flush, and Mountpoint completes the upload at the
 * first flush, so the next write fails with EBADF ("file handle has been invalidated").
 */
export function writeSequential(path: string, bytes: Uint8Array): Promise<void> {
  try {
    using f = Deno.openSync(path, { write: true, createNew: true });
    for (let off = 0; off < bytes.length; off += 1 << 20) {
      const chunk = bytes.subarray(off, Math.min(bytes.length, off + (1 << 20)));
      let written = 0;
      while (written < chunk.length) written += f.writeSync(chunk.subarray(written));
    }
    f.syncSync();
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The errno code (`EIO`, `EPERM`, …) of an error a file-system call threw, if it has one. */
export function errno(err: unknown): string | undefined {
  return (err as { code?: string } | undefined)?.code;
}

/**
 * Write `bytes` to `path` with `dd ... conv=fsync` in a child process (for tests whose event loop
 * must keep running meanwhile, e.g. one that serves a proxy). @throws with dd's message
 */
export async function writeWithDd(path: string, bytes: Uint8Array): Promise<void> {
  const src = await Deno.makeTempFile({ prefix: "s3csi-engine-src-" });
  try {
    await Deno.writeFile(src, bytes);
    const r = await new Deno.Command("dd", {
      args: [`if=${src}`, `of=${path}`, "bs=1M", "conv=fsync", "status=none"],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (r.code !== 0) {
      throw new Error(`dd to ${path} failed: ${new TextDecoder().decode(r.stderr).trim()}`);
    }
  } finally {
    await Deno.remove(src);
  }
}

/** sha256 hex of a file, streamed. */
export async function fileSha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  using f = await Deno.open(path);
  for await (const chunk of f.readable) hash.update(chunk);
  return hash.digest("hex");
}

/** `Deno.test` that registers as skipped, with the reason in its name and on stderr. */
export function engineTest(
  name: string,
  reason: string | undefined,
  fn: (t: Deno.TestContext) => Promise<void>,
): void {
  testOrSkip(reason, { name, sanitizeResources: false, sanitizeOps: false, fn });
}

/** Fail when a mount of ours is left behind (and remove it lazily). */
export async function assertNoLeftoverMounts(): Promise<void> {
  const left = (await readMountInfo()).filter((m) => m.mountPoint.includes("s3csi-engine-mnt-"));
  for (const m of left) umount(m.mountPoint, true);
  if (left.length) throw new Error(`left mounted: ${left.map((m) => m.mountPoint).join(", ")}`);
}
