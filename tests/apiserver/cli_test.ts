/**
 * `deno task apiserver` (tests/testbed/cmd/apiserver/main.ts) as a separate process: it writes the
 * kubeconfig once it listens, kubectl and a client-node child process (informer) work with it
 * over HTTPS + token, and SIGTERM stops it.
 */
import assert from "node:assert/strict";
import { kubectl, kubectlTest, waitFor } from "./_helpers.ts";

const MAIN = new URL("../../tests/testbed/cmd/apiserver/main.ts", import.meta.url).pathname;

kubectlTest(
  "s3-csi-apiserver writes a kubeconfig, serves kubectl and exits on SIGTERM",
  async () => {
    const dir = await Deno.makeTempDir();
    const kc = `${dir}/kubeconfig`;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", MAIN, "--port", "0", "--kubeconfig-out", kc, "--log-level", "warning"],
      stdout: "null",
      stderr: "piped",
      signal: AbortSignal.timeout(30_000),
    }).spawn();
    try {
      await waitFor("kubeconfig", async () => {
        try {
          return (await Deno.stat(kc)).size > 0;
        } catch {
          return false;
        }
      }, { timeoutMs: 20_000, intervalMs: 50 });
      const text = await Deno.readTextFile(kc);
      assert.match(text, /server: https:\/\/127\.0\.0\.1:\d+/);
      assert.match(text, /insecure-skip-tls-verify: true/);
      assert.match(text, /token: \S+/);
      const r = await kubectl(kc, ["get", "namespaces", "-o", "name"]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /namespace\/kube-system/);
      const probe = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", new URL("./_client_node_probe.ts", import.meta.url).pathname],
        env: { KUBECONFIG: kc },
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(20_000),
      }).output();
      const probeOut = new TextDecoder().decode(probe.stdout);
      assert.equal(probeOut.trim(), "ok 4 from-child", new TextDecoder().decode(probe.stderr));
    } finally {
      child.kill("SIGTERM");
      const status = await child.status;
      await child.stderr.cancel();
      assert.equal(status.code, 0);
      await Deno.remove(dir, { recursive: true });
    }
  },
);
