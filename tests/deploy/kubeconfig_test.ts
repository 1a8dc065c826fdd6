/**
 * `deno task deploy`/`undeploy` read kubeconfigs like kubectl: exec credential plugins (a fake one,
 * `_fake_exec_plugin.sh`, stands in for `aws eks get-token` & co.) with caching, re-runs on expiry
 * and on 401, `interactiveMode`; merged `KUBECONFIG` lists; plain http only when asked; and the
 * server must run Kubernetes 1.31 or newer. Against the API emulator over https.
 *
 * @module
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { loadCliKubeConfig } from "../../src/kube/kube_config.ts";
import { NAMESPACES } from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { ROOT, runToEnd, tempDir } from "../_helpers.ts";

const PLUGIN = `${ROOT}tests/deploy/_fake_exec_plugin.sh`;

/** Run `src/cmd/<task>/main.ts` with `env` (PATH and HOME added). */
function cli(task: "deploy" | "undeploy", args: string[], env: Record<string, string>) {
  return runToEnd(Deno.execPath(), [
    "run",
    "-A",
    "--quiet",
    `${ROOT}src/cmd/${task}/main.ts`,
    ...args,
  ], {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    ...env,
  });
}

interface ExecUser {
  apiVersion?: string;
  interactiveMode?: string;
  provideClusterInfo?: boolean;
  command?: string;
  installHint?: string;
  env?: Record<string, string>;
  args?: string[];
}

/** A kubeconfig for `server` whose user is `user`. */
function kubeconfig(server: string, user: Record<string, unknown>): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server, "insecure-skip-tls-verify": true } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
    "current-context": "x",
  });
}

function execUser(state: string, e: ExecUser): Record<string, unknown> {
  return {
    exec: {
      apiVersion: e.apiVersion ?? "client.authentication.k8s.io/v1",
      command: e.command ?? PLUGIN,
      args: e.args ?? [],
      env: Object.entries({ FAKE_STATE: state, ...e.env }).map(([name, value]) => ({
        name,
        value,
      })),
      ...(e.interactiveMode !== undefined ? { interactiveMode: e.interactiveMode } : {}),
      ...(e.provideClusterInfo ? { provideClusterInfo: true } : {}),
      ...(e.installHint ? { installHint: e.installHint } : {}),
    },
  };
}

/**
 * In `dir`: the fake plugin's state dir (`state`, made) and a kubeconfig (`path`) for `server`
 * whose user runs the plugin with `user`'s settings.
 */
async function execKubeconfig(
  dir: string,
  server: string,
  user: ExecUser,
): Promise<{ state: string; path: string }> {
  const state = `${dir}/state`;
  await Deno.mkdir(state, { recursive: true });
  const path = `${dir}/config`;
  await Deno.writeTextFile(path, kubeconfig(server, execUser(state, user)));
  return { state, path };
}

async function runs(state: string): Promise<number> {
  let n = 0;
  for await (const f of Deno.readDir(state)) if (f.name.startsWith("info.")) n++;
  return n;
}

async function execInfo(state: string, n: number) {
  return JSON.parse(await Deno.readTextFile(`${state}/info.${n}`)) as {
    apiVersion: string;
    spec: { interactive: boolean; cluster?: Record<string, unknown> };
  };
}

async function emulator(tls = true) {
  const api = await startApiServer({ podTerminationMs: 0, tls });
  return {
    api,
    async [Symbol.asyncDispose]() {
      await api.stop();
      await Deno.remove(api.kubeconfigPath).catch(() => {});
    },
  };
}

Deno.test("kubeconfig: exec plugins (v1 and v1beta1) authenticate deploy; one run for the whole command; env, args and cluster info passed", async (t) => {
  await using e = await emulator();
  for (
    const apiVersion of [
      "client.authentication.k8s.io/v1",
      "client.authentication.k8s.io/v1beta1",
    ]
  ) {
    await t.step(apiVersion, async () => {
      await using dir = await tempDir();
      const { state, path } = await execKubeconfig(dir.path, e.api.url, {
        apiVersion,
        // v1 requires interactiveMode; v1beta1 defaults to IfAvailable.
        ...(apiVersion.endsWith("/v1") ? { interactiveMode: "IfAvailable" } : {}),
        provideClusterInfo: true,
        args: ["--region", "eu-west-1"],
        env: { FAKE_TOKENS: e.api.token },
      });
      const r = await cli("deploy", ["--dry-run"], { KUBECONFIG: path });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /Dry run of s3\.csi\.scality\.com/);
      assert.equal(await runs(state), 1, "the plugin's credential is cached for the whole command");
      const info = await execInfo(state, 1);
      assert.equal(info.apiVersion, apiVersion);
      assert.equal(info.spec.interactive, false, "stdin is not a terminal here");
      assert.equal(info.spec.cluster?.server, e.api.url);
      assert.equal(info.spec.cluster?.["insecure-skip-tls-verify"], true);
      assert.equal(await Deno.readTextFile(`${state}/args.1`), "--region\neu-west-1\n");
      assert.equal((await Deno.readTextFile(`${state}/tty.1`)).trim(), "no");
    });
  }
});

Deno.test("kubeconfig: exec credentials are cached until expirationTimestamp, and the plugin runs again after a 401", async (t) => {
  await using e = await emulator();
  /** A client of the CLI's kubeconfig loading whose user runs the plugin with `env`. */
  const client = async (dir: string, env: Record<string, string>) => {
    const { state, path } = await execKubeconfig(dir, e.api.url, { interactiveMode: "Never", env });
    const loaded = loadCliKubeConfig({ kubeconfig: path, stdinIsTerminal: false });
    return { c: new RestKubeClient(loaded.config), state };
  };
  await t.step("valid for an hour: one run for three calls", async () => {
    await using dir = await tempDir();
    const { c, state } = await client(dir.path, {
      FAKE_TOKENS: e.api.token,
      FAKE_EXPIRES: new Date(Date.now() + 3_600_000).toISOString(),
    });
    for (let i = 0; i < 3; i++) await c.list(NAMESPACES);
    await c.close();
    assert.equal(await runs(state), 1);
  });
  await t.step("already expired: a run per call", async () => {
    await using dir = await tempDir();
    const { c, state } = await client(dir.path, {
      FAKE_TOKENS: e.api.token,
      FAKE_EXPIRES: "2001-01-01T00:00:00Z",
    });
    for (let i = 0; i < 3; i++) await c.list(NAMESPACES);
    await c.close();
    assert.equal(await runs(state), 3);
  });
  await t.step("rejected (401): the plugin runs again and the call succeeds", async () => {
    await using dir = await tempDir();
    const { c, state } = await client(dir.path, { FAKE_TOKENS: `revoked ${e.api.token}` });
    const list = await c.list(NAMESPACES);
    assert.ok(list.items.length > 0);
    await c.close();
    assert.equal(await runs(state), 2);
  });
});

Deno.test("kubeconfig: a plugin that cannot give credentials fails the command with what to do", async (t) => {
  await using e = await emulator();
  await using dir = await tempDir();
  const run = async (user: ExecUser) => {
    const { path } = await execKubeconfig(dir.path, e.api.url, user);
    return await cli("deploy", ["--dry-run"], { KUBECONFIG: path });
  };
  await t.step("not installed: the install hint is shown", async () => {
    const r = await run({
      command: "aws-iam-authenticator-not-installed",
      interactiveMode: "Never",
      installHint: "Install it: https://example.com/install",
    });
    assert.equal(r.code, 2);
    assert.match(
      r.stderr,
      /exec credential plugin "aws-iam-authenticator-not-installed" was not found .*Install it: https:\/\/example\.com\/install/,
    );
  });
  await t.step("fails: its own message, then ours", async () => {
    const r = await run({ interactiveMode: "Never", env: { FAKE_EXIT: "3", FAKE_TOKENS: "x" } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /your session expired, run 'fake login'/);
    assert.match(r.stderr, /failed with exit code 3/);
  });
  await t.step("answers another apiVersion", async () => {
    const r = await run({
      interactiveMode: "Never",
      env: { FAKE_TOKENS: "x", FAKE_API: "client.authentication.k8s.io/v1beta1" },
    });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /answered with apiVersion "client\.authentication\.k8s\.io\/v1beta1"/);
  });
  await t.step("interactiveMode Always without a terminal", async () => {
    const r = await run({ interactiveMode: "Always", env: { FAKE_TOKENS: "x" } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /needs an interactive terminal \(interactiveMode: Always\)/);
  });
});

Deno.test("kubeconfig: interactiveMode gives the plugin the terminal only when allowed", async (t) => {
  // `script` (util-linux) runs the command on a pseudo-terminal, as a user's shell would.
  const hasScript = (await runToEnd("script", ["--version"]).catch(() => undefined))?.code === 0;
  if (!hasScript) {
    // deno-lint-ignore no-console
    console.error("interactiveMode test: util-linux `script` not found, skipped");
    return;
  }
  await using e = await emulator();
  for (
    const [mode, expected] of [["IfAvailable", true], ["Always", true], ["Never", false]] as const
  ) {
    await t.step(`${mode} on a terminal`, async () => {
      await using dir = await tempDir();
      const { state, path } = await execKubeconfig(dir.path, e.api.url, {
        interactiveMode: mode,
        env: { FAKE_TOKENS: e.api.token },
      });
      const command = [
        Deno.execPath(),
        "run",
        "-A",
        "--quiet",
        `${ROOT}src/cmd/deploy/main.ts`,
        "--dry-run",
      ].map((a) => `'${a}'`).join(" ");
      const r = await runToEnd("script", ["-qec", command, "/dev/null"], {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        HOME: Deno.env.get("HOME") ?? "/root",
        KUBECONFIG: path,
      });
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal((await execInfo(state, 1)).spec.interactive, expected);
      assert.equal((await Deno.readTextFile(`${state}/tty.1`)).trim(), expected ? "yes" : "no");
    });
  }
});

Deno.test("kubeconfig: a KUBECONFIG list is merged like kubectl's (missing files skipped, first definition wins)", async () => {
  await using e = await emulator();
  await using dir = await tempDir();
  const a = `${dir.path}/a`;
  const b = `${dir.path}/b`;
  await Deno.writeTextFile(
    a,
    stringify({
      "current-context": "emu",
      contexts: [{ name: "emu", context: { cluster: "emu", user: "admin" } }],
      users: [{ name: "admin", user: { token: e.api.token } }],
    }),
  );
  await Deno.writeTextFile(
    b,
    stringify({
      "current-context": "elsewhere",
      clusters: [{ name: "emu", cluster: { server: e.api.url, "insecure-skip-tls-verify": true } }],
      users: [{ name: "admin", user: { token: "a-wrong-token-that-must-lose" } }],
    }),
  );
  const r = await cli("deploy", ["--dry-run"], {
    KUBECONFIG: [`${dir.path}/missing`, a, b].join(":"),
  });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /kubeconfig .*\/a, .*\/b \(merged\), context emu/);
  // --kubeconfig names one file, used alone: b has no context "emu".
  const alone = await cli("deploy", ["--dry-run", "--kubeconfig", b, "--context", "emu"], {});
  assert.equal(alone.code, 2);
  assert.match(alone.stderr, /has no context named "emu"/);
});

Deno.test("kubeconfig: plain http is refused unless --allow-insecure-http", async () => {
  await using e = await emulator(false);
  const refused = await cli("deploy", ["--dry-run"], { KUBECONFIG: e.api.kubeconfigPath });
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /is plain http: .*pass --allow-insecure-http/);
  const allowed = await cli("deploy", ["--dry-run", "--allow-insecure-http"], {
    KUBECONFIG: e.api.kubeconfigPath,
  });
  assert.equal(allowed.code, 0, allowed.stderr);
});

Deno.test("deploy: refuses a server older than Kubernetes 1.31 before applying anything", async () => {
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return Response.json({ major: "1", minor: "30", gitVersion: "v1.30.14" });
  });
  await using dir = await tempDir();
  const path = `${dir.path}/config`;
  await Deno.writeTextFile(
    path,
    kubeconfig(`http://127.0.0.1:${server.addr.port}`, { token: "t" }),
  );
  try {
    const r = await cli("deploy", ["--allow-insecure-http"], { KUBECONFIG: path });
    assert.equal(r.code, 2, r.stderr);
    assert.match(
      r.stderr,
      /runs Kubernetes v1\.30\.14; the S3 CSI driver needs 1\.31 or newer .*selectableFields.*nothing was applied/,
    );
    assert.deepEqual(seen, ["GET /version"]);
  } finally {
    await server.shutdown();
  }
});
