import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { FakeFiles } from "../sys/fake_files.ts";
import {
  credentialsEnv,
  credentialsFileText,
  removeCredentials,
  resolveCredentials,
  writeCredentials,
} from "./credentials.ts";

const env = (vars: Record<string, string>) => (n: string) => vars[n];
const DRIVER = env({ AWS_ACCESS_KEY_ID: "AKIADRIVER", AWS_SECRET_ACCESS_KEY: "drv/Secret+1=" });

Deno.test("resolveCredentials() driver: from the node's environment", () => {
  const c = resolveCredentials("driver", undefined, DRIVER);
  assert.deepEqual(c, {
    source: "driver",
    accessKeyId: "AKIADRIVER",
    secretAccessKey: "drv/Secret+1=",
  });
  assert.equal(
    credentialsFileText(c),
    "[s3-csi]\naws_access_key_id=AKIADRIVER\naws_secret_access_key=drv/Secret+1=\n",
  );
});

Deno.test("resolveCredentials() secret: from the node-publish Secret, never the driver", () => {
  const c = resolveCredentials(
    "secret",
    { access_key_id: " AKIAVOL ", secret_access_key: "vol-secret", session_token: "tok" },
    DRIVER,
  );
  assert.deepEqual(c, {
    source: "secret",
    accessKeyId: "AKIAVOL",
    secretAccessKey: "vol-secret",
    sessionToken: "tok",
  });
});

Deno.test("resolveCredentials() takes a Secret's endpoint and region as no credentials", () => {
  const where = { endpoint: "https://s3.site-b.example", region: "site-b" };
  assert.equal(resolveCredentials("driver", where, DRIVER).accessKeyId, "AKIADRIVER");
  const c = resolveCredentials(
    "secret",
    { ...where, access_key_id: "AKIAVOL", secret_access_key: "vol-secret" },
    DRIVER,
  );
  assert.deepEqual(c, { source: "secret", accessKeyId: "AKIAVOL", secretAccessKey: "vol-secret" });
  assert.throws(
    () => resolveCredentials("secret", where, DRIVER),
    /Node-publish Secret: access key id is missing.*got keys: endpoint, region/,
  );
});

Deno.test("resolveCredentials() refuses instead of falling back", async (t) => {
  const cases: [string, () => unknown, number, RegExp][] = [
    [
      "secret without secrets",
      () => resolveCredentials("secret", {}, DRIVER),
      3,
      /sent no node-publish secrets/,
    ],
    [
      "secrets on a driver volume",
      () => resolveCredentials("driver", { access_key_id: "A", endpoint: "http://h" }, DRIVER),
      3,
      /Secret has keys access_key_id but authenticationSource is "driver".*keep only endpoint and region/,
    ],
    [
      "malformed secret key",
      () => resolveCredentials("secret", { access_key_id: "A", secret_access_key: "a b" }, DRIVER),
      3,
      /secret access key is missing or malformed.*got keys: access_key_id, secret_access_key/,
    ],
    [
      "driver without keys",
      () => resolveCredentials("driver", undefined, env({})),
      9,
      /Driver credentials: access key id is missing/,
    ],
  ];
  for (const [name, fn, code, re] of cases) {
    await t.step(name, () => {
      assert.throws(
        fn,
        (e: unknown) => e instanceof CsiError && e.code === code && re.test(e.message),
      );
    });
  }
});

Deno.test("credentialsEnv() points at the files inside the pod", () => {
  assert.deepEqual(credentialsEnv(), [
    "AWS_CONFIG_FILE=/comm/credentials/s3-csi-config",
    "AWS_PROFILE=s3-csi",
    "AWS_SHARED_CREDENTIALS_FILE=/comm/credentials/s3-csi-credentials",
  ]);
});

Deno.test("removeCredentials() unlinks the two files by name; what the pod added keeps the directory", async (t) => {
  const creds = { source: "driver" as const, accessKeyId: "AKIAX", secretAccessKey: "s" };
  const user = { uid: 1000, gid: 1000 };
  await t.step("alone, the directory goes too", async () => {
    const files = new FakeFiles();
    files.addDir("/comm");
    using comm = (await files.openDir("/comm"))!;
    await writeCredentials(comm, creds, user);
    assert.equal(await removeCredentials(comm), true);
    assert.deepEqual(await files.readDir("/comm"), []);
    assert.equal(await removeCredentials(comm), false, "nothing left: idempotent");
  });
  await t.step("names the pod added keep the directory, without the credentials", async () => {
    const files = new FakeFiles();
    files.addDir("/comm");
    using comm = (await files.openDir("/comm"))!;
    await writeCredentials(comm, creds, user);
    await files.writeFile("/comm/credentials/planted-by-the-pod", "");
    await files.mkdir("/comm/credentials/sub");
    // (DirHandle has no way to list: the plugin only works with the names it wrote.)
    assert.equal(await removeCredentials(comm), true);
    assert.equal(await files.readTextFile("/comm/credentials/s3-csi-credentials"), undefined);
    assert.equal(await files.readTextFile("/comm/credentials/s3-csi-config"), undefined);
    assert.deepEqual(await files.readDir("/comm/credentials"), ["planted-by-the-pod", "sub"]);
  });
  await t.step("a link planted in place of the directory is removed itself", async () => {
    const files = new FakeFiles();
    files.addDir("/comm");
    files.plant("/comm/credentials", { kind: "symlink", target: "/etc" });
    using comm = (await files.openDir("/comm"))!;
    assert.equal(await removeCredentials(comm), true);
    assert.deepEqual(await files.readDir("/comm"), []);
  });
});
