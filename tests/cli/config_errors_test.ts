/**
 * Bad configuration stops each binary with exit code 2 and one line on stderr that names the
 * problem; `--help` and `--version` exit 0.
 */
import assert from "node:assert/strict";
import { ENTRYPOINTS, runToEnd, tempDir, writeDummyKubeconfig } from "../_helpers.ts";

type Binary = keyof typeof ENTRYPOINTS;

async function run(binary: Binary, args: string[], env: Record<string, string> = {}) {
  return await runToEnd(Deno.execPath(), ["run", "-A", "--quiet", ENTRYPOINTS[binary], ...args], {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    ...env,
  });
}

Deno.test("each binary answers --help and --version with exit 0", async (t) => {
  for (const binary of Object.keys(ENTRYPOINTS) as Binary[]) {
    await t.step(binary, async () => {
      const help = await run(binary, ["--help"]);
      assert.equal(help.code, 0, help.stderr);
      assert.match(
        help.stdout,
        new RegExp(`^s3-csi-${binary}: .*\\n\\nUsage: s3-csi-${binary} \\[flags\\]`),
      );
      assert.match(help.stdout, /--log-level=/);
      const version = await run(binary, ["--version"]);
      assert.equal(version.code, 0, version.stderr);
      assert.match(
        version.stdout,
        new RegExp(`^s3-csi-${binary} \\d+\\.\\d+\\.\\d+ \\(s3.csi.scality.com`),
      );
    });
  }
});

Deno.test("bad configuration exits 2 with a one-line error naming the problem", async (t) => {
  await using dir = await tempDir();
  const kubeconfig = await writeDummyKubeconfig(dir.path);
  const cases: [string, Binary, string[], Record<string, string>, RegExp][] = [
    ["unknown flag", "node", ["--bogus"], { CSI_NODE_NAME: "n" }, /Unknown option '--bogus'/],
    ["missing node id", "node", [], {}, /Missing required setting --node-id \(env CSI_NODE_NAME\)/],
    [
      "tcp endpoint",
      "node",
      ["--endpoint=tcp://0.0.0.0:10000"],
      { CSI_NODE_NAME: "n" },
      /must be a unix socket URL/,
    ],
    [
      "endpoint from env",
      "node",
      [],
      { CSI_NODE_NAME: "n", CSI_ENDPOINT: "/no/scheme.sock" },
      /CSI_ENDPOINT\) must be a unix socket URL/,
    ],
    [
      "bad log level",
      "node",
      ["--log-level=loud"],
      { CSI_NODE_NAME: "n" },
      /--log-level \(env LOG_LEVEL\) must be one of/,
    ],
    [
      "relative kubelet path",
      "node",
      ["--kubelet-path=var/lib"],
      { CSI_NODE_NAME: "n" },
      /must be an absolute path/,
    ],
    [
      "no kube config",
      "node",
      ["--endpoint", `unix://${dir.path}/a.sock`],
      { CSI_NODE_NAME: "n" },
      /No Kubernetes API configuration: set KUBECONFIG/,
    ],
    [
      "unreadable KUBECONFIG",
      "controller",
      [],
      { KUBECONFIG: `${dir.path}/missing` },
      /KUBECONFIG ".*missing" cannot be loaded/,
    ],
    ["controller bad endpoint", "controller", ["--csi-endpoint=tcp://x"], {
      KUBECONFIG: kubeconfig,
    }, /--csi-endpoint \(env CSI_ENDPOINT\) must be a unix socket URL/],
    [
      "bad duration",
      "mounter",
      ["--receive-timeout=soon"],
      {},
      /--receive-timeout \(env MOUNTER_RECEIVE_TIMEOUT\) must be a duration/,
    ],
    [
      "bad engine",
      "mounter",
      [],
      { MOUNTER_ENGINE: "s3fs" },
      /must be one of auto, mount-s3, rclone, got "s3fs"/,
    ],
    [
      "missing comm dir",
      "mounter",
      [`--comm-dir=${dir.path}/nope`],
      {},
      /comm dir ".*nope" does not exist/,
    ],
  ];
  for (const [name, binary, args, env, pattern] of cases) {
    await t.step(name, async () => {
      const r = await run(binary, args, env);
      assert.equal(r.code, 2, `exit code for ${name}: ${r.stderr}`);
      // Log records may precede it; the error itself is exactly one line.
      const errors = r.stderr.trim().split("\n").filter((l) =>
        l.startsWith(`s3-csi-${binary}: error: `)
      );
      assert.equal(errors.length, 1, `one error line expected, got:\n${r.stderr}`);
      assert.match(errors[0]!, pattern);
    });
  }
});
