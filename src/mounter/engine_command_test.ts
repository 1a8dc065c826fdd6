import assert from "node:assert/strict";
import type { MountMessage } from "../mppod/mount_message.ts";
import { engineCommand, EngineOptionError } from "./engine_command.ts";

const CTX = { commDir: "/var/lib/kubelet/pods/u/comm", workDir: "/tmp/w", program: "/usr/bin/x" };
const MSG: MountMessage = {
  bucketName: "bucket-1",
  args: [
    "--allow-delete",
    "--allow-other",
    "--dir-mode=0770",
    "--force-path-style",
    "--gid=3000",
    "--prefix=team/a/",
    "--read-only",
    "--user-agent-prefix=s3-csi-driver/0.1.0 credential-source#driver",
  ],
  env: [
    "AWS_CA_BUNDLE=/etc/ca.pem",
    "AWS_ENDPOINT_URL=http://s3:9000",
    "AWS_REGION=eu-west-1",
    "AWS_SHARED_CREDENTIALS_FILE=/comm/credentials/s3-csi-credentials",
  ],
};

Deno.test("engineCommand() mount-s3: foreground on /dev/fd/N with the message's env", () => {
  const c = engineCommand("mount-s3", MSG, 7, CTX);
  assert.deepEqual(c.args.slice(0, 3), ["bucket-1", "/dev/fd/7", "--foreground"]);
  assert.ok(c.args.includes("--prefix=team/a/"));
  assert.equal(
    c.env.AWS_SHARED_CREDENTIALS_FILE,
    "/var/lib/kubelet/pods/u/comm/credentials/s3-csi-credentials",
  );
});

Deno.test("engineCommand() rclone: translated options and env-only remote", () => {
  const c = engineCommand("rclone", MSG, 7, CTX);
  assert.deepEqual(c.args.slice(0, 3), ["mount2", "s3:bucket-1/team/a", "/dev/fd/7"]);
  for (const f of ["--read-only", "--gid=3000", "--dir-perms=0770", "--umask=0", "--allow-other"]) {
    assert.ok(c.args.includes(f), f);
  }
  assert.ok(c.args.includes("--user-agent=s3-csi-driver/0.1.0 credential-source#driver"));
  assert.equal(c.env.RCLONE_CONFIG_S3_ENDPOINT, "http://s3:9000");
  assert.equal(c.env.RCLONE_CONFIG_S3_REGION, "eu-west-1");
  assert.equal(c.env.RCLONE_CONFIG_S3_FORCE_PATH_STYLE, "true");
  assert.equal(c.env.RCLONE_CONFIG_S3_ENV_AUTH, "true");
  assert.equal(c.env.AWS_CA_BUNDLE, undefined, "rclone refuses AWS_CA_BUNDLE");
  assert.ok(c.args.includes("--ca-cert=/etc/ca.pem"), "the bundle as --ca-cert instead");
});

Deno.test("engineCommand() rclone: untranslatable options are errors naming them", async (t) => {
  for (
    const arg of [
      "--maximum-throughput-gbps=10",
      "--upload-checksums=crc32c",
      "--negative-metadata-ttl=5",
    ]
  ) {
    await t.step(arg, () => {
      assert.throws(
        () => engineCommand("rclone", { ...MSG, args: [...WRITABLE, arg] }, 7, CTX),
        (e: unknown) =>
          e instanceof EngineOptionError && e.message.includes(`"${arg.slice(2)}"`) &&
          e.message.includes("rclone engine"),
      );
    });
  }
});

const WRITABLE = ["--allow-delete", "--allow-overwrite"];

Deno.test("engineCommand() rclone: a writable volume must allow deletes and overwrites", async (t) => {
  for (
    const [args, missing] of [
      [[], "deletes or overwrites"],
      [["--allow-delete"], "overwrites"],
      [["--allow-overwrite"], "deletes"],
    ] as const
  ) {
    await t.step(`with ${args.join(" ") || "neither"}`, () => {
      assert.throws(
        () => engineCommand("rclone", { ...MSG, args: [...args] }, 7, CTX),
        (e: unknown) =>
          e instanceof EngineOptionError &&
          e.message.includes(`The rclone engine cannot refuse ${missing}`) &&
          e.message.includes("use the mount-s3 engine"),
      );
    });
  }
  // Read-only volumes delete and overwrite nothing; both flags together are honoured.
  engineCommand("rclone", { ...MSG, args: ["--read-only"] }, 7, CTX);
  engineCommand("rclone", { ...MSG, args: WRITABLE }, 7, CTX);
});

Deno.test("engineCommand() rclone: part sizes are bytes (rclone reads a bare number as KiB)", () => {
  const c = engineCommand(
    "rclone",
    {
      ...MSG,
      args: [...WRITABLE, "--part-size=8388608", "--read-part-size=5242881"],
    },
    7,
    CTX,
  );
  assert.equal(c.env.RCLONE_CONFIG_S3_CHUNK_SIZE, "8M");
  assert.ok(c.args.includes("--vfs-read-chunk-size=5242881B"), c.args.join(" "));
  const w = engineCommand(
    "rclone",
    {
      ...MSG,
      args: [...WRITABLE, "--write-part-size=10485760"],
    },
    7,
    CTX,
  );
  assert.equal(w.env.RCLONE_CONFIG_S3_CHUNK_SIZE, "10M");
});

Deno.test("engineCommand(): caches go to the pod's cache volume, never the comm dir", () => {
  const withCache = { ...CTX, cacheDir: "/cache" };
  const m = engineCommand(
    "mount-s3",
    {
      ...MSG,
      args: ["--cache=/comm/x", "--max-cache-size=100"],
    },
    7,
    withCache,
  );
  assert.ok(m.args.includes("--cache=/cache"), m.args.join(" "));
  assert.ok(m.args.includes("--max-cache-size=100"));
  const r = engineCommand(
    "rclone",
    {
      ...MSG,
      args: [...WRITABLE, "--cache=/cache", "--max-cache-size=100"],
    },
    7,
    withCache,
  );
  assert.ok(r.args.includes("--cache-dir=/cache/rclone-cache"), r.args.join(" "));
  assert.ok(r.args.includes("--vfs-cache-max-size=100M"));
  // Without a cache the rclone files stay in the work dir.
  const plain = engineCommand("rclone", { ...MSG, args: WRITABLE }, 7, withCache);
  assert.ok(plain.args.includes("--cache-dir=/tmp/w/rclone-cache"), plain.args.join(" "));
  for (const engine of ["mount-s3", "rclone"] as const) {
    assert.throws(
      () => engineCommand(engine, { ...MSG, args: [...WRITABLE, "--cache=/cache"] }, 7, CTX),
      (e: unknown) => e instanceof EngineOptionError && /has no cache volume/.test(e.message),
    );
  }
});

Deno.test("engineCommand(): the pod's CA bundle reaches the engine", () => {
  const msg = { ...MSG, env: MSG.env.filter((e) => !e.startsWith("AWS_CA_BUNDLE=")) };
  const ctx = { ...CTX, caBundle: "/etc/ssl/custom-ca/ca-bundle.crt" };
  const m = engineCommand("mount-s3", msg, 7, ctx);
  assert.equal(m.env.AWS_CA_BUNDLE, "/etc/ssl/custom-ca/ca-bundle.crt");
  assert.equal(engineCommand("mount-s3", msg, 7, CTX).env.AWS_CA_BUNDLE, undefined);
  const r = engineCommand("rclone", msg, 7, ctx);
  assert.ok(r.args.includes("--ca-cert=/etc/ssl/custom-ca/ca-bundle.crt"), r.args.join(" "));
  assert.equal(r.env.AWS_CA_BUNDLE, undefined);
});

Deno.test("engineCommand(): proxy variables reach both engines", () => {
  const msg = {
    ...MSG,
    env: [...MSG.env, "HTTPS_PROXY=http://p:3128", "http_proxy=http://p:3128", "NO_PROXY=s3"],
  };
  for (const engine of ["mount-s3", "rclone"] as const) {
    const c = engineCommand(engine, msg, 7, CTX);
    assert.equal(c.env.HTTPS_PROXY, "http://p:3128", engine);
    assert.equal(c.env.http_proxy, "http://p:3128", engine);
    assert.equal(c.env.NO_PROXY, "s3", engine);
  }
});

Deno.test("engineCommand() mount-s3: the pod's metrics port and labels reach the engine", () => {
  const labels = JSON.stringify({ "volume": "pv-1", "volume_id": "v,1", "mountpoint_pod": "mp-1" });
  const on = engineCommand("mount-s3", MSG, 7, { ...CTX, metrics: { port: 9102, labels } });
  assert.equal(on.env.MOUNT_S3_METRICS_PORT, "9102");
  assert.equal(on.env.MOUNT_S3_METRICS_LABELS, labels);
  const off = engineCommand("mount-s3", MSG, 7, { ...CTX, metrics: { port: 0, labels } });
  assert.equal(off.env.MOUNT_S3_METRICS_PORT, undefined);
  assert.equal(off.env.MOUNT_S3_METRICS_LABELS, undefined);
  assert.equal(engineCommand("mount-s3", MSG, 7, CTX).env.MOUNT_S3_METRICS_PORT, undefined);
  // rclone has no such endpoint: nothing is passed.
  const rclone = engineCommand(
    "rclone",
    {
      ...MSG,
      args: [...MSG.args, "--allow-overwrite"],
    },
    7,
    { ...CTX, metrics: { port: 9102, labels } },
  );
  assert.equal(rclone.env.MOUNT_S3_METRICS_PORT, undefined);
});
