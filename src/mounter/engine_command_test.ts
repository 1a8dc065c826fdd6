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
        () => engineCommand("rclone", { ...MSG, args: [arg] }, 7, CTX),
        (e: unknown) => e instanceof EngineOptionError && e.message.includes(`"${arg}"`),
      );
    });
  }
});
