/**
 * Upstream Mountpoint's options through our `mount-s3`, row by row of the driver's one list
 * (`src/mppod/mount_option_spec.ts`):
 *
 * 1. the built binary takes every example a volume may set (and its upstream short forms), refuses
 *    every value the node plugin refuses, and refuses every refused option naming the list's
 *    reason — so the Rust checks cannot drift from the node's list;
 * 2. on versitygw, the options added for upstream's users change what happens: requester-pays,
 *    expected-bucket-owner, user-agent-prefix and crc64nvme checksums are seen on the wire (a
 *    recording proxy), another owner is refused at start, no-sign-request mounts a public bucket
 *    without credentials, memory-target sets the engine's target, log-metrics and otlp-endpoint
 *    publish metrics, infer-content-type sets Content-Type, allow-root shuts other users out and
 *    --ca-bundle trusts a private CA.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
} from "@aws-sdk/client-s3";
import { MOUNT_OPTION_SPECS, type MountOptionSpec } from "../../src/mppod/mount_option_spec.ts";
import {
  assertNoLeftoverMounts,
  engineBin,
  engineEnv,
  engineTest,
  failingEngine,
  fuseReason,
  mountEngine,
  objectSha256,
  s3Client,
  sha256,
  startVersitygw,
  tempBucket,
  testBytes,
  versitygwReason,
  withBucket,
  writeWithDd,
} from "../testbed/harness/engine.ts";
import { startProxy } from "../testbed/harness/counting_proxy.ts";
import { freePort, waitFor } from "../_helpers.ts";

const MISSING_DIR = "/nonexistent/s3csi-options-test";

/** Run the binary on a mount point that does not exist: a parse that passes ends there (exit 3). */
function parseOnly(args: string[], env: Record<string, string> = {}) {
  return failingEngine({
    args: ["bucket-1", MISSING_DIR, ...args],
    env: { PATH: "/usr/bin:/bin", ...env },
    timeoutMs: 30_000,
  });
}

function accepted(r: { code: number; stderr: string }, what: string): void {
  assert.equal(r.code, 3, `${what}: exit ${r.code}: ${r.stderr}`);
  assert.match(r.stderr, new RegExp(`mount point ${MISSING_DIR}`), what);
}

function exampleArgs(s: MountOptionSpec): string[][] {
  const needs = (s.needs ?? []).map((n) => `--${n}`);
  return s.value
    ? (s.examples ?? []).map((v) => [`--${s.name}=${v}`, ...needs])
    : [[`--${s.name}`, ...needs]];
}

engineTest(
  "engine options: every row of the driver's list — examples accepted, invalid values and refused options named",
  engineBin().reason,
  async (t) => {
    const pem = await Deno.makeTempFile({ prefix: "s3csi-options-", suffix: ".pem" });
    await Deno.writeTextFile(pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    try {
      for (const s of MOUNT_OPTION_SPECS) {
        await t.step(`${s.name} (${s.status})`, async () => {
          if (s.status === "volume" || s.status === "ignored") {
            for (const args of exampleArgs(s)) accepted(await parseOnly(args), args.join(" "));
            for (const bad of s.invalid ?? []) {
              const r = await parseOnly([
                `--${s.name}=${bad}`,
                ...(s.needs ?? []).map((n) => `--${n}`),
              ]);
              assert.equal(r.code, 2, `--${s.name}=${bad}: ${r.stderr}`);
              assert.match(
                r.stderr,
                new RegExp(`^mount-s3: error: option '--${s.name}=.*' is invalid: `),
              );
            }
          } else if (s.status === "driver") {
            const value = s.name === "ca-bundle" ? pem : "http://127.0.0.1:9";
            accepted(await parseOnly([`--${s.name}=${value}`]), s.name);
          } else if (s.name === "help" || s.name === "version") {
            assert.equal((await parseOnly([`--${s.name}`])).code, 0);
          } else {
            const r = await parseOnly([s.value ? `--${s.name}=x` : `--${s.name}`]);
            assert.equal(r.code, 2, r.stderr);
            assert.equal(
              r.stderr.trim(),
              `mount-s3: error: option '--${s.name}' is not supported: ${s.reason}; run 'mount-s3 --help' for usage`,
            );
          }
          for (const c of s.short ?? []) {
            if (c === "v") continue; // not one of mount-s3's own forms (upstream drivers drop it)
            const r = await parseOnly([`-${c}`, ...(s.value ? ["x"] : [])]);
            if (s.status === "volume" || s.status === "ignored") accepted(r, `-${c}`);
            else if (c === "h" || c === "V") assert.equal(r.code, 0);
            else assert.match(r.stderr, new RegExp(`'--${s.name}' is not supported: `), `-${c}`);
          }
        });
      }
    } finally {
      await Deno.remove(pem);
    }
  },
);

const reason = fuseReason() ?? versitygwReason();

engineTest(
  "engine options: requester-pays, expected-bucket-owner, user-agent-prefix and crc64nvme reach the server",
  reason,
  async () => {
    await using server = await startVersitygw();
    const s3 = await s3Client(server);
    try {
      await using bucket = await tempBucket(s3);
      await s3.send(new PutObjectCommand({ Bucket: bucket.name, Key: "in.txt", Body: "hello" }));
      const owner = server.env.AWS_ACCESS_KEY_ID!;
      const bytes = testBytes(6 * 1024 * 1024 + 3, 7);
      await using proxy = await startProxy();
      {
        await using m = await mountEngine({
          bucket: bucket.name,
          server,
          env: { HTTP_PROXY: proxy.url },
          args: [
            "--requester-pays",
            `--expected-bucket-owner=${owner}`,
            "--user-agent-prefix=my-team/1.0",
            "--upload-checksums=crc64nvme",
          ],
        });
        assert.equal(await Deno.readTextFile(`${m.dir}/in.txt`), "hello");
        await writeWithDd(`${m.dir}/out.bin`, bytes); // a child process: the proxy runs here
        assert.equal(await m.unmount(), 0);
      }
      assert.equal(await objectSha256(s3, bucket.name, "out.bin"), sha256(bytes));
      const requests = proxy.log.requests;
      assert.ok(requests.length >= 4, `${requests.length} requests`);
      for (const r of requests) {
        const what = `${r.method} ${r.target}`;
        assert.equal(r.headers["x-amz-request-payer"], "requester", what);
        assert.equal(r.headers["x-amz-expected-bucket-owner"], owner, what);
        assert.match(r.headers["user-agent"] ?? "", /^my-team\/1\.0 mount-s3\//, what);
      }
      const checksummed = requests.filter((r) =>
        Object.entries(r.headers).some(([k, v]) => /crc64nvme/i.test(`${k}: ${v}`))
      );
      assert.ok(
        checksummed.some((r) => r.method === "PUT"),
        `no upload carries a CRC64NVME checksum: ${
          requests.map((r) => `${r.method} ${JSON.stringify(r.headers)}`).join("\n")
        }`,
      );
      assert.ok(!requests.some((r) => /crc32c/i.test(JSON.stringify(r.headers))), "crc32c sent");
      // Control: without the options, none of it is sent (the checks above can fail).
      await using plain = await startProxy();
      {
        await using m = await mountEngine({
          bucket: bucket.name,
          server,
          env: { HTTP_PROXY: plain.url },
        });
        assert.equal(await Deno.readTextFile(`${m.dir}/in.txt`), "hello");
        assert.equal(await m.unmount(), 0);
      }
      assert.ok(plain.log.requests.length > 0);
      for (const r of plain.log.requests) {
        assert.equal(r.headers["x-amz-request-payer"], undefined);
        assert.equal(r.headers["x-amz-expected-bucket-owner"], undefined);
        assert.match(r.headers["user-agent"] ?? "", /^mount-s3\//);
      }
    } finally {
      s3.closeAll();
      await assertNoLeftoverMounts();
    }
  },
);

engineTest(
  "engine options: expected-bucket-owner naming another owner fails the start (access denied, exit 5)",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        const r = await failingEngine({
          args: [bucket, dir, "--force-path-style", "--expected-bucket-owner=999999999999"],
          env: engineEnv(server),
        });
        assert.equal(r.code, 5, r.stderr);
        assert.match(r.stderr, /access to bucket .* was denied/);
      } finally {
        await Deno.remove(dir);
      }
    }),
);

engineTest(
  "engine options: no-sign-request mounts a public-read bucket without credentials",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "pub.txt", Body: "public" }));
      await s3.send(
        new PutBucketPolicyCommand({
          Bucket: bucket,
          Policy: JSON.stringify({
            Version: "2012-10-17",
            Statement: [{
              Effect: "Allow",
              Principal: "*",
              Action: ["s3:GetObject", "s3:ListBucket"],
              Resource: [`arn:aws:s3:::${bucket}`, `arn:aws:s3:::${bucket}/*`],
            }],
          }),
        }),
      );
      const anonymous = engineEnv(server);
      delete anonymous.AWS_ACCESS_KEY_ID;
      delete anonymous.AWS_SECRET_ACCESS_KEY;
      {
        await using m = await mountEngine({
          bucket,
          server,
          fullEnv: anonymous,
          args: ["--no-sign-request", "--read-only"],
        });
        const names: string[] = [];
        for await (const e of Deno.readDir(m.dir)) names.push(e.name);
        assert.deepEqual(names, ["pub.txt"]);
        assert.equal(await Deno.readTextFile(`${m.dir}/pub.txt`), "public");
        assert.equal(await m.unmount(), 0);
      }
      // Control: the same environment without the option finds no credentials.
      const dir = await Deno.makeTempDir({ prefix: "s3csi-engine-mnt-" });
      try {
        const r = await failingEngine({
          args: [bucket, dir, "--force-path-style"],
          env: anonymous,
        });
        assert.equal(r.code, 5, r.stderr);
      } finally {
        await Deno.remove(dir);
      }
    }),
);

engineTest(
  "engine options: memory-target sets the engine's memory target (else 95 % of the memory)",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      for (
        const [args, re] of [
          [["--memory-target=1024"], /memory target.*memory_target_mib=1024 from_option=true/],
          [[], /memory target.*memory_target_mib=\d+ from_option=false/],
        ] as const
      ) {
        await using m = await mountEngine({ bucket, server, args: [...args] });
        assert.match(m.proc.stdout(), re);
        assert.equal(await m.unmount(), 0);
      }
    }),
);

engineTest(
  "engine options: log-metrics logs the library's metrics; without it none are logged",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "a.txt", Body: "a" }));
      const metricLine = /mountpoint_s3_fs::metrics/;
      {
        await using m = await mountEngine({ bucket, server, args: ["--log-metrics"] });
        await Deno.readTextFile(`${m.dir}/a.txt`);
        await waitFor("a metrics line", () => metricLine.test(m.proc.stdout()), {
          timeoutMs: 20_000,
          intervalMs: 200,
        });
        assert.match(m.proc.stdout(), /s3\.requests|fuse\.|process\.memory_usage/);
        assert.equal(await m.unmount(), 0);
      }
      {
        await using m = await mountEngine({ bucket, server });
        await Deno.readTextFile(`${m.dir}/a.txt`);
        await new Promise((r) => setTimeout(r, 6_000)); // longer than the 5 s publishing period
        assert.equal(await m.unmount(), 0);
        assert.doesNotMatch(m.proc.stdout(), metricLine);
      }
    }),
);

engineTest(
  "engine options: otlp-endpoint exports the metrics to an OTLP/HTTP collector",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "a.txt", Body: "a" }));
      const posts: { path: string; type: string; bytes: number }[] = [];
      const port = freePort();
      const collector = Deno.serve(
        { port, hostname: "127.0.0.1", onListen: () => {} },
        async (req) => {
          const body = new Uint8Array(await req.arrayBuffer());
          posts.push({
            path: new URL(req.url).pathname,
            type: req.headers.get("content-type") ?? "",
            bytes: body.length,
          });
          return new Response(null, { status: 200 });
        },
      );
      try {
        await using m = await mountEngine({
          bucket,
          server,
          args: [`--otlp-endpoint=http://127.0.0.1:${port}`, "--otlp-export-interval=1"],
        });
        await Deno.readTextFile(`${m.dir}/a.txt`);
        await waitFor("an OTLP export", () => posts.some((p) => p.bytes > 0), {
          timeoutMs: 30_000,
          intervalMs: 200,
        });
        assert.equal(await m.unmount(), 0);
        const post = posts.find((p) => p.bytes > 0)!;
        assert.equal(post.path, "/v1/metrics");
        assert.match(post.type, /application\/x-protobuf/);
      } finally {
        await collector.shutdown();
      }
    }),
);

engineTest(
  "engine options: infer-content-type sets Content-Type from the extension; without it it is not",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      for (
        const [args, key] of [[["--infer-content-type"], "typed.json"], [[], "plain.json"]] as const
      ) {
        await using m = await mountEngine({ bucket, server, args: [...args] });
        await writeWithDd(`${m.dir}/${key}`, new TextEncoder().encode('{"a":1}'));
        assert.equal(await m.unmount(), 0);
      }
      const typed = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "typed.json" }));
      const plain = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "plain.json" }));
      assert.equal(typed.ContentType, "application/json");
      assert.notEqual(plain.ContentType, "application/json");
    }),
);

/** `cat path` as another user; its exit code and stderr. */
async function catAs(uid: number, path: string): Promise<{ code: number; stderr: string }> {
  const r = await new Deno.Command("setpriv", {
    args: [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "cat", path],
    stdout: "null",
    stderr: "piped",
  }).output();
  return { code: r.code, stderr: new TextDecoder().decode(r.stderr) };
}

engineTest(
  "engine options: allow-root admits root and shuts other users out; allow-other admits them",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "f.txt", Body: "data" }));
      {
        await using m = await mountEngine({ bucket, server, args: ["--allow-root"] });
        assert.equal(await Deno.readTextFile(`${m.dir}/f.txt`), "data", "root reads");
        const other = await catAs(2000, `${m.dir}/f.txt`);
        assert.notEqual(other.code, 0, "uid 2000 read a root-only volume");
        assert.match(other.stderr, /Permission denied/);
        assert.equal(await m.unmount(), 0);
      }
      {
        await using m = await mountEngine({ bucket, server, args: ["--allow-other"] });
        const other = await catAs(2000, `${m.dir}/f.txt`);
        assert.equal(other.code, 0, other.stderr);
        assert.equal(await m.unmount(), 0);
      }
    }),
);

engineTest(
  "engine options: --ca-bundle trusts a private CA without AWS_CA_BUNDLE",
  reason,
  async () => {
    await using server = await startVersitygw({ tls: true });
    const s3 = await s3Client(server);
    try {
      await using bucket = await tempBucket(s3);
      await s3.send(new PutObjectCommand({ Bucket: bucket.name, Key: "t.txt", Body: "tls" }));
      {
        await using m = await mountEngine({
          bucket: bucket.name,
          server,
          args: [`--ca-bundle=${server.caFile}`],
        });
        assert.equal(await Deno.readTextFile(`${m.dir}/t.txt`), "tls");
        assert.equal(await m.unmount(), 0);
      }
      const r = await s3.send(new GetObjectCommand({ Bucket: bucket.name, Key: "t.txt" }));
      assert.equal(await r.Body!.transformToString(), "tls");
    } finally {
      s3.closeAll();
      await assertNoLeftoverMounts();
    }
  },
);
