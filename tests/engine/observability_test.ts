/**
 * What our mount-s3 tells about itself, on real mounts against versitygw: per-volume Prometheus
 * metrics that move with reads, writes and errors (`MOUNT_S3_METRICS_PORT`, labels from
 * `MOUNT_S3_METRICS_LABELS`), OTLP export (`--otlp-endpoint`), one line and exit 7 for a panic on
 * any thread, and exit 6 naming the endpoint when S3 does not answer within the start deadline.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import {
  engineBin,
  engineTest,
  errno,
  failingEngine,
  fuseReason,
  mountEngine,
  startVersitygw,
  testBytes,
  versitygwReason,
  withBucket,
  writeSequential,
} from "../testbed/harness/engine.ts";
import { freePort, waitFor } from "../_helpers.ts";
import { engineMetricsLabels } from "../../src/mppod/engine_metrics.ts";

const reason = fuseReason() ?? versitygwReason();
const MIB = 1024 * 1024;

/** One sample of the Prometheus text format. */
interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Parse the Prometheus text exposition (samples only). */
function parseSamples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

async function scrape(port: number): Promise<Sample[]> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseSamples(await r.text());
}

/** Sum of the samples named `name` whose labels include `match`. */
function total(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

/** Labels as the controller makes them (a volume handle may hold any character). */
const LABELS = engineMetricsLabels("mp-metrics", "pv-metrics", 'vol/1,a=b "q"');

engineTest(
  "engine metrics: the Prometheus figures of a mount move with its reads, writes and errors, labelled by volume and pod",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      const read = testBytes(5 * MIB + 1, 7);
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "read.bin", Body: read }));
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "keep.txt", Body: "keep" }));
      const port = freePort();
      // --no-log: the FUSE latency figures need the library's span layer even without logs.
      await using m = await mountEngine({
        bucket,
        server,
        args: ["--no-log"],
        env: {
          MOUNT_S3_METRICS_PORT: String(port),
          MOUNT_S3_METRICS_LABELS: JSON.stringify(LABELS),
        },
      });
      const before = await waitFor(
        "the metrics endpoint",
        () => scrape(port).catch(() => undefined),
      );
      // The start's bucket check is already counted.
      assert.ok(
        total(before, "mountpoint_s3_requests_total", { s3_request: "ListObjectsV2" }) >= 1,
      );

      // Read N bytes: the FUSE read bytes and the S3 object bytes grow by at least N.
      assert.deepEqual(await Deno.readFile(`${m.dir}/read.bin`), read);
      // Write N bytes: the FUSE write bytes grow by at least N.
      const written = testBytes(3 * MIB + 5, 8);
      await writeSequential(`${m.dir}/written.bin`, written);
      // Errors: a missing file (S3 answers 404) and a delete without --allow-delete (EPERM).
      const missing = await Deno.stat(`${m.dir}/missing.txt`).then(() => undefined, (e) => e);
      assert.equal(errno(missing), "ENOENT");
      const denied = await Deno.remove(`${m.dir}/keep.txt`).then(() => undefined, (e) => e);
      assert.equal(errno(denied), "EPERM");

      const after = await scrape(port);
      const grew = (name: string, match: Record<string, string> = {}) =>
        total(after, name, match) - total(before, name, match);
      assert.ok(grew("mountpoint_fuse_bytes_total", { type: "read" }) >= read.length);
      assert.ok(grew("mountpoint_s3_bytes_total", { type: "read" }) >= read.length);
      assert.ok(grew("mountpoint_fuse_bytes_total", { type: "write" }) >= written.length);
      assert.ok(grew("mountpoint_s3_requests_total", { s3_request: "GetObject" }) >= 1);
      // The write is uploaded in parts (the CRT streams an upload of unknown size).
      const requests = after.filter((x) => x.name === "mountpoint_s3_requests_total");
      assert.ok(
        grew("mountpoint_s3_requests_total", { s3_request: "UploadPart" }) >= 1 &&
          grew("mountpoint_s3_requests_total", { s3_request: "CompleteMultipartUpload" }) >= 1,
        JSON.stringify(requests.map((x) => [x.labels.s3_request, x.value])),
      );
      assert.ok(grew("mountpoint_s3_request_errors_total", { http_status: "404" }) >= 1);
      assert.ok(grew("mountpoint_fuse_request_errors_total", { fuse_request: "unlink" }) >= 1);
      // Latency: S3 requests and FUSE reads are timed.
      assert.ok(
        grew("mountpoint_s3_request_duration_seconds_count", { s3_request: "GetObject" }) >= 1,
      );
      assert.ok(
        grew("mountpoint_fuse_request_duration_seconds_count", { fuse_request: "read" }) >= 1,
      );
      assert.ok(total(after, "process_resident_memory_bytes") > 1 * MIB);
      assert.equal(total(after, "mountpoint_info"), 1);
      // Every sample carries the volume's labels.
      for (const s of after) {
        for (const [k, v] of Object.entries(LABELS)) assert.equal(s.labels[k], v, `${s.name}.${k}`);
      }
      assert.equal(await m.unmount(), 0);
    }),
);

engineTest(
  "engine metrics: a metrics port already in use is a warning, the mount still serves",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      using taken = Deno.listen({ hostname: "0.0.0.0", port: 0 });
      const port = (taken.addr as Deno.NetAddr).port;
      await using m = await mountEngine({
        bucket,
        server,
        args: ["--allow-overwrite"],
        env: { MOUNT_S3_METRICS_PORT: String(port) },
      });
      await Deno.writeTextFile(`${m.dir}/still-works.txt`, "yes");
      assert.equal(await Deno.readTextFile(`${m.dir}/still-works.txt`), "yes");
      assert.match(m.proc.stdout(), /WARN .*metrics: cannot listen on port \d+: .*not served/);
      assert.equal(await m.unmount(), 0);
    }),
);

engineTest(
  "engine metrics: --otlp-endpoint exports the library's figures with the volume's labels",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: "o.bin", Body: testBytes(MIB, 3) }),
      );
      const bodies: { path: string; type: string; body: string }[] = [];
      const collector = Deno.serve(
        { hostname: "127.0.0.1", port: 0, onListen: () => {} },
        async (req) => {
          const body = new TextDecoder("latin1").decode(await req.arrayBuffer());
          bodies.push({
            path: new URL(req.url).pathname,
            type: req.headers.get("content-type") ?? "",
            body,
          });
          return new Response(null, { status: 200 });
        },
      );
      try {
        await using m = await mountEngine({
          bucket,
          server,
          args: [
            `--otlp-endpoint=http://127.0.0.1:${collector.addr.port}`,
            "--otlp-export-interval=1",
          ],
          env: { MOUNT_S3_METRICS_LABELS: JSON.stringify({ volume: "pv-otlp" }) },
        });
        assert.equal((await Deno.readFile(`${m.dir}/o.bin`)).length, MIB);
        const sent = await waitFor(
          "an OTLP export with the S3 figures",
          () =>
            bodies.find((b) => b.body.includes("s3.request_count") && b.body.includes("pv-otlp")),
          { timeoutMs: 20_000 },
        );
        assert.equal(sent.path, "/v1/metrics");
        assert.equal(sent.type, "application/x-protobuf");
        assert.ok(sent.body.includes("fuse.io_size"), "FUSE figures are exported too");
        assert.equal(await m.unmount(), 0);
      } finally {
        await collector.shutdown();
      }
    }),
);

engineTest(
  "engine: a panic on the main thread is one line on stderr and exit code 7",
  engineBin().reason,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-panic-" });
    try {
      const r = await failingEngine({
        args: ["bucket", dir],
        env: { PATH: "/usr/bin:/bin", MOUNT_S3_TEST_PANIC: "start" },
      });
      assert.equal(r.code, 7, r.stderr);
      assert.match(
        r.stderr,
        /^mount-s3: error: internal error \(panic\): MOUNT_S3_TEST_PANIC=start: test panic at start at src\/panic_hook\.rs:\d+:\d+\n$/,
      );
    } finally {
      await Deno.remove(dir);
    }
  },
);

engineTest(
  "engine: a panic on another thread while serving ends the engine with one line and exit code 7",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      const port = freePort();
      await using m = await mountEngine({
        bucket,
        server,
        env: { MOUNT_S3_METRICS_PORT: String(port), MOUNT_S3_TEST_PANIC: "serving" },
      });
      assert.deepEqual(await Array.fromAsync(Deno.readDir(m.dir)), []);
      // The first connection to the metrics endpoint panics its thread.
      const conn = await Deno.connect({ hostname: "127.0.0.1", port });
      const code = await m.proc.child.status.then((s) => s.code);
      conn.close();
      assert.equal(code, 7);
      assert.match(
        m.proc.stderr(),
        /^mount-s3: error: internal error \(panic\): MOUNT_S3_TEST_PANIC=serving: test panic while serving at src\/metrics\.rs:\d+:\d+\n$/,
      );
      assert.equal(await m.unmount(), 7);
    }),
);

/** A TCP server that accepts connections and never answers; closed on dispose. */
function silentServer(): { port: number } & Disposable {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  (async () => {
    for await (const c of listener) conns.push(c);
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    [Symbol.dispose]: () => {
      listener.close();
      for (const c of conns) c.close();
    },
  };
}

for (
  const [limit, env] of [
    [3, { MOUNT_S3_START_TIMEOUT: "3" }],
    [20, {}],
  ] as const
) {
  engineTest(
    `engine: S3 that never answers fails the start after ${limit} s (${
      limit === 20 ? "the default" : "MOUNT_S3_START_TIMEOUT"
    }) with exit 6 naming the endpoint`,
    engineBin().reason,
    async () => {
      using silent = silentServer();
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-hung-" });
      try {
        const endpoint = `http://127.0.0.1:${silent.port}`;
        const t0 = performance.now();
        const r = await failingEngine({
          args: ["bucket", dir, "--force-path-style"],
          env: {
            PATH: "/usr/bin:/bin",
            HOME: "/tmp",
            AWS_ACCESS_KEY_ID: "test",
            AWS_SECRET_ACCESS_KEY: "test",
            AWS_REGION: "us-east-1",
            AWS_ENDPOINT_URL: endpoint,
            AWS_EC2_METADATA_DISABLED: "true",
            ...env,
          },
          timeoutMs: 60_000,
        });
        const seconds = (performance.now() - t0) / 1000;
        assert.equal(r.code, 6, r.stderr);
        assert.ok(seconds >= limit - 0.5 && seconds < limit + 5, `ended after ${seconds} s`);
        assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
        assert.match(
          r.stderr,
          new RegExp(
            `^mount-s3: error: no answer from S3 within ${limit} s at start: listing bucket 'bucket' \\(endpoint ${endpoint}, region us-east-1\\) did not finish`,
          ),
        );
      } finally {
        await Deno.remove(dir);
      }
    },
  );
}
