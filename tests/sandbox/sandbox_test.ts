/**
 * `deno task sandbox` end to end as a real process: every step completes and it exits 0, leaving
 * nothing running or mounted (checked here from outside too) — on the API emulator and, when
 * `KUBE_REAL_KUBECONFIG` names a running real tier, with `--real-apiserver` (which then reuses that
 * tier and must leave it running and clean). A step that does not complete within `--timeout`
 * fails the run (exit 1) naming what it waited for; nothing is ever reported as "pending".
 */
import assert from "node:assert/strict";
import { dirname } from "node:path";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { NAMESPACES, NODES, PVS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { mountsUnder, processesUsing } from "../testbed/sandbox/leftovers.ts";
import { findEngineBin } from "../testbed/kubelet/mounter_image.ts";
import { writeStderr } from "../../src/util/stdio.ts";
import { exists, realTierSkipReason, ROOT, runToEnd, testOrSkip } from "../_helpers.ts";

const ROOT_SKIP = Deno.uid() === 0 ? undefined : "needs root (FUSE mounts, RGW)";
const REAL_KUBECONFIG = Deno.env.get("KUBE_REAL_KUBECONFIG");

/** Every step of the default scenario, in order. */
const ALL_STEPS = [
  "API emulator",
  "CRD, namespaces, PriorityClass, CSIDriver applied",
  "Scheduler and PV binder \\(emulated\\)",
  "S3 server",
  "Node node-1",
  "Node node-2",
  "Controller process",
  "csi-provisioner \\(emulated\\) connected",
  "Bucket created",
  "PV and PVC bound",
  "Workload pod scheduled",
  "Controller: S3PA \\+ Mountpoint Pod for the workload",
  "Volume published; workload wrote and read a file through the mount",
  "Object landed in S3",
  "Second node: a reader pod",
  "Workload deleted",
  "Mountpoint Pod released",
  "Dynamic provisioning: StorageClass \\+ PVC → CreateVolume, PV bound, new bucket",
  "Dynamic volume: a pod wrote a file through the mount",
  "Dynamic volume: object landed in S3",
  "Dynamic volume: pod and PVC deleted → DeleteVolume, PV and bucket gone",
  "Controller stopped",
  "Kubelets stopped",
  "Node plugins stopped",
  "S3 server stopped",
  "Driver processes ran without a crash or restart",
  "Nothing left mounted or running",
];

async function runSandbox(args: string[], env: Record<string, string> = {}) {
  const t0 = performance.now();
  const r = await runToEnd("deno", ["task", "--cwd", ROOT, "sandbox", ...args], {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    ...env,
  });
  const seconds = (performance.now() - t0) / 1000;
  const dir = /state and logs: (\S+)/.exec(r.stdout)?.[1];
  return { ...r, seconds, dir };
}

async function assertClean(out: Awaited<ReturnType<typeof runSandbox>>): Promise<void> {
  assert.equal(out.code, 0, `exit code; stdout:\n${out.stdout}\nstderr:\n${out.stderr}`);
  assert.ok(out.dir, out.stdout);
  assert.doesNotMatch(out.stdout, /✗|pending/, out.stdout);
  assert.match(out.stdout, /✓ Driver processes ran without a crash or restart/);
  assert.match(out.stdout, /✓ Nothing left mounted or running/);
  assert.match(out.stdout, /\d+ done, \d+ skipped, 0 failed in [\d.]+ s/);
  assert.match(out.stdout, /kubeconfig: /);
  assert.match(out.stdout, /kubectl get/);
  assert.deepEqual(await mountsUnder(out.dir!), []);
  assert.deepEqual([...(await processesUsing(out.dir!)).values()], []);
  assert.equal(await exists(out.dir!), false, "state dir removed after a clean run");
}

testOrSkip(ROOT_SKIP, {
  name:
    "deno task sandbox runs end to end (versitygw and mount-s3 when root): every step done, nothing left",
  sanitizeResources: false,
  async fn() {
    const out = await runSandbox([]);
    await assertClean(out);
    const server = /✓ S3 server: (\w+)/.exec(out.stdout)?.[1];
    const engine = /volumes on (mount-s3|rclone)/.exec(out.stdout)?.[1];
    // The tier's output says which S3 server and engine were used and how long the run took.
    writeStderr(`sandbox used ${server} and ${engine}; ${out.seconds.toFixed(1)} s wall time\n`);
    writeStderr(`${out.stdout.split("\n").filter((l) => /^\s+[✓○✗•]/.test(l)).join("\n")}\n`);
    // The default: versitygw, and our mount-s3 whenever scripts/build_engine.sh built it.
    assert.equal(server, "versitygw", out.stdout);
    if ("bin" in findEngineBin()) assert.equal(engine, "mount-s3", out.stdout);
    for (const step of ALL_STEPS) assert.match(out.stdout, new RegExp(`✓ ${step}`), step);
    assert.match(out.stdout, /\d+ done, 0 skipped, 0 failed/);
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "deno task sandbox with the s3rver fake and one node: dynamic provisioning skipped, said why",
  sanitizeResources: false,
  async fn() {
    const out = await runSandbox(["--s3", "s3rver", "--nodes", "1"]);
    await assertClean(out);
    assert.match(out.stdout, /✓ S3 server: s3rver at http:\/\/127\.0\.0\.1:\d+/);
    assert.doesNotMatch(out.stdout, /node-2/);
    assert.match(out.stdout, /✓ Object landed in S3/);
    // The fake lacks bucket APIs CreateVolume uses: the dynamic part is skipped, with the reason.
    assert.match(
      out.stdout,
      /(✓ Dynamic volume: pod and PVC deleted|○ skipped Dynamic provisioning: .*: s3rver does not implement)/,
    );
  },
});

testOrSkip(ROOT_SKIP, {
  name:
    "deno task sandbox fails closed: a step that does not complete within --timeout fails the run (exit 1), naming what it waited for",
  sanitizeResources: false,
  async fn() {
    const out = await runSandbox([
      "--s3",
      "s3rver",
      "--nodes",
      "1",
      "--without-controller",
      "--timeout",
      "3s",
    ]);
    try {
      assert.equal(out.code, 1, out.stdout);
      assert.match(out.stdout, /• Controller process: not started \(--without-controller\)/);
      assert.match(
        out.stdout,
        /✗ Controller: S3PA \+ Mountpoint Pod for the workload: timed out after 3 s waiting for a MountpointS3PodAttachment naming pod default\/sandbox-writer and its Mountpoint Pod \(no controller running: --without-controller\)/,
      );
      // The static part ends at the failed step: no step that needed it is reported done.
      assert.doesNotMatch(out.stdout, /Volume published|Object landed in S3/);
      assert.match(
        out.stdout,
        /✗ Dynamic provisioning: .*: no controller running \(--without-controller\)/,
      );
      assert.doesNotMatch(out.stdout, /pending/);
      assert.match(out.stdout, /\d+ done, 0 skipped, 2 failed in [\d.]+ s\n/);
      assert.match(
        out.stdout,
        /FAILED: Controller: S3PA \+ Mountpoint Pod for the workload: timed out/,
      );
      // Failing closed still tears everything down.
      assert.match(out.stdout, /✓ Nothing left mounted or running/);
      assert.match(out.stdout, /state and logs kept in /);
      assert.ok(out.dir, out.stdout);
      assert.deepEqual(await mountsUnder(out.dir!), []);
      assert.deepEqual([...(await processesUsing(out.dir!)).values()], []);
    } finally {
      if (out.dir) await Deno.remove(out.dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "deno task sandbox --real-apiserver fails with a one-line reason when the tier cannot run",
  sanitizeResources: false,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "s3csi-kr-cache-" });
    try {
      // No cached binaries and no Go: start.sh exits 3 (cannot run here).
      const out = await runSandbox(["--real-apiserver", "--s3", "s3rver"], {
        KUBE_REAL_CACHE: cache,
        KUBE_REAL_GO: "/nonexistent/go",
        KUBE_REAL_STATE: `${cache}/state`,
      });
      assert.equal(out.code, 1, out.stdout);
      assert.match(
        out.stdout,
        /✗ Real kube-apiserver tier \(.*\): the real kube-apiserver tier cannot run here: .*Go/,
      );
      assert.equal(out.stdout.split("\n").filter((l) => /✗/.test(l)).length, 1, out.stdout);
      assert.match(out.stdout, /✓ Nothing left mounted or running/);
      if (out.dir) await Deno.remove(out.dir, { recursive: true });
    } finally {
      await Deno.remove(cache, { recursive: true });
    }
  },
});

testOrSkip(ROOT_SKIP ?? realTierSkipReason(), {
  name:
    "deno task sandbox --real-apiserver runs end to end on the running real tier, reuses it and leaves it clean",
  sanitizeResources: false,
  async fn() {
    // The tier scripts/test.sh started: its state dir holds the kubeconfig it exported.
    const out = await runSandbox(["--real-apiserver"], {
      KUBE_REAL_STATE: dirname(REAL_KUBECONFIG!),
    });
    await assertClean(out);
    writeStderr(`sandbox --real-apiserver: ${out.seconds.toFixed(1)} s wall time\n`);
    assert.match(out.stdout, /✓ Real kube-apiserver tier .*\(already running, reused\)/);
    assert.match(out.stdout, /✓ Real tier: left running/);
    assert.match(out.stdout, /✓ Real tier: the run's namespaces, nodes and PVs deleted/);
    for (
      const step of [
        "Volume published; workload wrote and read a file through the mount",
        "Object landed in S3",
        "Second node: a reader pod",
        "Mountpoint Pod released",
        "Dynamic volume: pod and PVC deleted → DeleteVolume, PV and bucket gone",
      ]
    ) {
      assert.match(out.stdout, new RegExp(`✓ ${step}`), step);
    }
    const run = /workloads in sandbox-([0-9a-f]{8})/.exec(out.stdout)?.[1];
    assert.ok(run, out.stdout);
    const c = new RestKubeClient(kubeConfigFromFile(REAL_KUBECONFIG!));
    const mine = (name: string | undefined) => name?.includes(run!) ?? false;
    assert.deepEqual((await c.list(NODES)).items.filter((n) => mine(n.metadata?.name)), []);
    assert.deepEqual((await c.list(PVS)).items.filter((p) => mine(p.metadata?.name)), []);
    assert.deepEqual(
      (await c.list(STORAGE_CLASSES)).items.filter((x) => mine(x.metadata?.name)),
      [],
    );
    // Namespace deletion is asynchronous: gone, or at least being deleted.
    for (const ns of (await c.list(NAMESPACES)).items.filter((n) => mine(n.metadata?.name))) {
      assert.ok(ns.metadata?.deletionTimestamp, `namespace ${ns.metadata?.name} not deleted`);
    }
  },
});
