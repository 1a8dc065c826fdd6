/**
 * `deno task sandbox` end to end as a real process: it runs whatever parts exist, reports the rest
 * as pending, exits 0, and leaves nothing running or mounted (checked here from outside too).
 */
import assert from "node:assert/strict";
import { mountsUnder, processesUsing } from "../../src/sandbox/sandbox.ts";
import { writeStderr } from "../../src/util/stdio.ts";
import { exists, ROOT, runToEnd } from "../_helpers.ts";

const isRoot = Deno.uid() === 0;

async function runSandbox(args: string[]) {
  const t0 = performance.now();
  const r = await runToEnd("deno", ["task", "--cwd", ROOT, "sandbox", ...args], {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
  });
  const seconds = (performance.now() - t0) / 1000;
  const dir = /state and logs: (\S+)/.exec(r.stdout)?.[1];
  return { ...r, seconds, dir };
}

async function assertClean(out: Awaited<ReturnType<typeof runSandbox>>): Promise<void> {
  assert.equal(out.code, 0, `exit code; stdout:\n${out.stdout}\nstderr:\n${out.stderr}`);
  assert.ok(out.dir, out.stdout);
  assert.doesNotMatch(out.stdout, /✗/, out.stdout);
  assert.match(out.stdout, /✓ Nothing left mounted or running/);
  assert.match(out.stdout, /kubeconfig: /);
  assert.match(out.stdout, /kubectl get/);
  assert.deepEqual(await mountsUnder(out.dir!), []);
  assert.deepEqual([...(await processesUsing(out.dir!)).values()], []);
  assert.equal(await exists(out.dir!), false, "state dir removed after a clean run");
}

Deno.test({
  name: "deno task sandbox runs end to end (RGW when root) and leaves nothing running or mounted",
  ignore: !isRoot,
  sanitizeResources: false,
  async fn() {
    const out = await runSandbox([]);
    await assertClean(out);
    const server = /✓ S3 server: (\w+)/.exec(out.stdout)?.[1];
    // The tier's output says which S3 server was used and how long the run took.
    writeStderr(`sandbox used ${server}; ${out.seconds.toFixed(1)} s wall time\n`);
    writeStderr(`${out.stdout.split("\n").filter((l) => /^\s+[✓…✗]/.test(l)).join("\n")}\n`);
    for (
      const step of ["API emulator", "S3 server", "Node node-1", "Node node-2", "Bucket created"]
    ) {
      assert.match(out.stdout, new RegExp(`✓ ${step}`), step);
    }
    // Every scenario step either worked or is pending on a named issue.
    for (const line of out.stdout.split("\n").filter((l) => /^\s+… /.test(l))) {
      assert.match(line, /pending \S.*\(issue #\d+\)/, line);
    }
  },
});

Deno.test({
  name: "deno task sandbox with the s3rver fallback and one node",
  ignore: !isRoot,
  sanitizeResources: false,
  async fn() {
    const out = await runSandbox(["--s3", "s3rver", "--nodes", "1"]);
    await assertClean(out);
    assert.match(out.stdout, /✓ S3 server: s3rver at http:\/\/127\.0\.0\.1:\d+/);
    assert.doesNotMatch(out.stdout, /node-2/);
  },
});

Deno.test({
  name:
    "deno task sandbox reports a missing component as pending and still exits 0, leaving nothing",
  ignore: !isRoot,
  sanitizeResources: false,
  async fn() {
    const out = await runSandbox([
      "--s3",
      "s3rver",
      "--nodes",
      "1",
      "--without-controller",
      "--controller-timeout",
      "3s",
    ]);
    await assertClean(out);
    assert.match(out.stdout, /• Controller process: not started/);
    assert.match(
      out.stdout,
      /… pending Controller: S3PA \+ Mountpoint Pod for the workload: \(issue #5\)/,
    );
    assert.match(out.stdout, /… pending Object landed in S3: \(issue #\d\)/);
    assert.match(out.stdout, /\d+ done, [1-9]\d* pending, 0 failed/);
  },
});
