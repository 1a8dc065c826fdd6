/**
 * Unit tests of what protects the node from a hostile Mountpoint Pod and from races: planted
 * links and FIFOs in the comm dir, publish/unpublish of one target, cancellation by the call's
 * deadline, an API that never answered, and what reaches the workload's Events.
 */
import assert from "node:assert/strict";
import { Code, CsiError } from "../csi/errors.ts";
import { FakeKubeClient } from "../kube/fake_client.ts";
import { hostCommDir, sourceMountDir, sourceMountRoot } from "../mppod/paths.ts";
import { findMount } from "../sys/mountinfo.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { shortMessage } from "./comm_dir.ts";
import { Custody } from "./custody.ts";
import { HealthChecker } from "./health.ts";
import { MountpointPods } from "./mountpoint_pods.ts";
import { validatePublish } from "./publish_request.ts";
import { Publisher } from "./publisher.ts";
import { POD_INVARIANTS, ROOT, world } from "./_test_fixtures.ts";

const req = (target: string) => ({
  volumeId: "vol-pv-1",
  targetPath: target,
  volumeCapability: {
    mount: { mountFlags: ["allow-delete"] },
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  },
  volumeContext: { bucketName: "bucket-1" },
});

const code = (c: Code, pattern?: RegExp) => (e: unknown) =>
  e instanceof CsiError && e.code === c && (!pattern || pattern.test(e.message));

Deno.test("Publisher: a credentials link planted by the pod is refused, nothing written through it", async () => {
  await using w = await world();
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const comm = hostCommDir(ROOT, uid);
  const victim = hostCommDir(ROOT, "other-pod");
  w.files.addDir(victim);
  w.files.plant(`${comm}/credentials`, { kind: "symlink", target: victim });
  const t = w.target("uid-a", "pv-1");
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    code(Code.FAILED_PRECONDITION, /tampered with its comm dir.*credentials.*symlink/),
  );
  assert.deepEqual(w.files.children(victim), [], "nothing written into the other pod's dir");
  assert.equal(w.files.dirMeta.get(victim), undefined, "the other dir was not chowned");
  assert.equal(w.sys.callsOf("mountFuse").length, 0);
  assert.equal(w.files.specials.has(`${comm}/credentials`), false, "the planted link was removed");
});

Deno.test("Publisher: a mount.error FIFO or link is never read and the publish fails clearly", async () => {
  for (const kind of ["fifo", "symlink"] as const) {
    await using w = await world();
    const uid = await w.addMountpointPod("mp-1");
    await w.assign("pv-1", "mp-1", ["uid-a"]);
    const comm = hostCommDir(ROOT, uid);
    w.sys.failNext("waitMountReady", new Error("no answer"));
    const t = w.target("uid-a", "pv-1");
    const publishing = w.publisher.publish(validatePublish(req(t), ROOT), {});
    // The pod swaps mount.error after the node removed the stale one.
    setTimeout(() => w.files.plant(`${comm}/mount.error`, { kind, target: "/etc/shadow" }), 0);
    await assert.rejects(publishing, (e: unknown) => e instanceof CsiError);
    assert.deepEqual(w.sys.mounts.filter((m) => m.fsType === "fuse"), [], kind);
    assert.equal(
      [...w.files.files.keys()].some((k) => k.includes("/credentials/")),
      false,
      "credentials removed after the failure",
    );
  }
});

Deno.test("Publisher: an unpublish during a slow publish cancels it; nothing is bind-mounted later", async () => {
  await using w = await world({ timeouts: { attachmentMs: 5000, podRunningMs: 5000 } });
  const t = w.target("uid-a", "pv-1");
  const publishing = w.publisher.publish(validatePublish(req(t), ROOT), {});
  await new Promise((r) => setTimeout(r, 10)); // waiting for the assignment
  assert.equal(await w.publisher.unpublish(t), "not-mounted");
  await assert.rejects(publishing, code(Code.ABORTED, /NodeUnpublishVolume .* arrived/));
  // The assignment shows up after all: still no mount on the target.
  await w.attachOne();
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(findMount(w.sys.mounts, t), undefined);
  assert.equal(w.sys.callsOf("bindMount").length, 0);
});

Deno.test("Publisher: the call's signal stops a publish waiting for its pod; no bind after it", async () => {
  await using w = await world({ timeouts: { attachmentMs: 5000, podRunningMs: 5000 } });
  await w.addMountpointPod("mp-1", "Pending");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const t = w.target("uid-a", "pv-1");
  const deadline = new AbortController();
  const publishing = w.publisher.publish(validatePublish(req(t), ROOT), {}, deadline.signal);
  await new Promise((r) => setTimeout(r, 10));
  const reason = new Error("deadline");
  deadline.abort(reason);
  await assert.rejects(publishing, (e) => e === reason);
  assert.equal(w.sys.callsOf("mountFuse").length, 0);
});

Deno.test("Publisher: publish and unpublish of one target are serialised", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  // Many concurrent calls on one target: each sees a consistent state, the last one wins.
  const results = await Promise.allSettled([
    w.publisher.unpublish(t),
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    w.publisher.unpublish(t),
  ]);
  assert.equal(results[0]!.status, "fulfilled");
  assert.equal(results[2]!.status, "fulfilled");
  assert.equal(findMount(w.sys.mounts, t), undefined, "the last unpublish wins");
});

Deno.test("Publisher: without the API caches, mounted targets still answer and new ones are UNAVAILABLE", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  // A fresh node plugin whose API never answered, on the same node.
  const pods = new MountpointPods(new FakeKubeClient(), {
    nodeName: "node-1",
    namespace: "mount-s3",
  });
  const locks = new KeyedMutex();
  const cold = new Publisher({
    sys: w.sys,
    files: w.files,
    pods,
    locks,
    custody: new Custody({ sys: w.sys, files: w.files, kubeletRoot: ROOT, locks, pods }),
    health: new HealthChecker(w.files),
    kubeletRoot: ROOT,
    env: () => "AKIATEST",
    endpoint: undefined,
    region: "us-east-1",
    readAheadKb: 0,
    mountpointPod: POD_INVARIANTS,
    timeouts: { attachmentMs: 50 },
  });
  assert.equal(await cold.publish(validatePublish(req(t), ROOT), {}), "already-published");
  const t2 = w.target("uid-b", "pv-1");
  await assert.rejects(
    cold.publish(validatePublish(req(t2), ROOT), {}),
    code(Code.UNAVAILABLE, /Kubernetes API/),
  );
  assert.equal(await cold.unpublish(t), "unmounted");
});

Deno.test("Publisher: source dirs are 0700; the bucket check's error carries no access key id", async () => {
  await using w = await world({
    probe: {
      probe: () =>
        Promise.resolve({
          ok: false,
          reason: "access-denied",
          message: "AccessDenied for AKIATEST",
        }),
    },
  });
  await w.attachOne();
  await assert.rejects(
    w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError && e.code === Code.PERMISSION_DENIED && !e.message.includes("AKIATEST"),
  );
  assert.equal(w.files.dirMeta.get(sourceMountRoot(ROOT))?.mode, 0o700);
  assert.equal(w.files.dirMeta.get(sourceMountDir(ROOT, "mp-1"))?.mode, 0o700);
});

Deno.test("shortMessage(): one short line, no control characters, secrets redacted", () => {
  const report = `rclone exited with code 1 without an unmount request:\n${"noise\n".repeat(500)}` +
    `\x1b[31m2026/01/01 CRITICAL: Failed to create file system: AccessDenied key AKIAXYZ\x07\x1b[0m\n`;
  const m = shortMessage(report, ["AKIAXYZ"]);
  assert.ok(m.length <= 400, m);
  assert.doesNotMatch(m, /AKIAXYZ/);
  assert.ok(![...m].some((c) => c.charCodeAt(0) < 0x20), "no control characters");
  assert.match(
    m,
    /^rclone exited with code 1 .* … .*Failed to create file system: AccessDenied key <redacted>$/,
  );
  // One long line keeps its start and its end (the cause and the hint).
  const long = `mount-s3 exited with code 6: mount-s3: error: cannot reach bucket 'b' ${
    "x".repeat(600)
  } (TLS: is the server's certificate signed by a CA in AWS_CA_BUNDLE?)`;
  const l = shortMessage(long);
  assert.equal(l.length, 400);
  assert.match(l, /^mount-s3 exited with code 6: mount-s3: error: cannot reach bucket 'b' x+…x+/);
  assert.match(l, /\(TLS: is the server's certificate signed by a CA in AWS_CA_BUNDLE\?\)$/);
});
