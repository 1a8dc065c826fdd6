import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { PODS } from "../kube/resources.ts";
import type { Pod } from "../kube/types.ts";
import { ANNOTATION_BROKEN, ANNOTATION_NEEDS_UNMOUNT } from "../mppod/labels.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { hostCommDir, sourceMountDir } from "../mppod/paths.ts";
import { SysError } from "../sys/errno.ts";
import { findMount } from "../sys/mountinfo.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { validatePublish } from "./publish_request.ts";
import type { BucketProbe, ProbeTarget } from "../s3/bucket_probe.ts";
import { ROOT, world } from "./_test_fixtures.ts";

async function until(check: () => unknown): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
}

const req = (target: string, more: Record<string, unknown> = {}) => ({
  volumeId: "vol-pv-1",
  targetPath: target,
  volumeCapability: {
    mount: { mountFlags: ["allow-delete"] },
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  },
  volumeContext: { bucketName: "bucket-1" },
  ...more,
});

Deno.test("Publisher: first publish mounts the source, sends fd + options, binds the target", async () => {
  await using w = await world();
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a", "uid-b"]);
  const ta = w.target("uid-a", "pv-1");
  assert.equal(await w.publisher.publish(validatePublish(req(ta), ROOT), {}), "source-and-bind");

  const source = sourceMountDir(ROOT, "mp-1");
  const fuse = w.sys.callsOf("mountFuse")[0]!;
  assert.equal(fuse.args[0], source);
  assert.deepEqual({ ...(fuse.args[1] as object), fd: 0 }, {
    fd: 0,
    readOnly: false,
    allowOther: true,
  });
  const fd = (fuse.args[1] as { fd: number }).fd;
  assert.ok(w.sys.callsOf("closeFd").some((c) => c.args[0] === fd), "our fd copy is closed");
  await until(() => w.received.get("mp-1")?.length);
  const msg = w.received.get("mp-1")![0]!;
  assert.equal(msg.bucketName, "bucket-1");
  assert.deepEqual(msg.args.filter((a) => !a.startsWith("--user-agent-prefix")), [
    "--allow-delete",
    "--allow-other",
    "--force-path-style",
  ]);
  assert.ok(msg.env.includes("AWS_ENDPOINT_URL=http://s3.local:9000"));
  assert.ok(msg.env.includes("AWS_SHARED_CREDENTIALS_FILE=/comm/credentials/s3-csi-credentials"));
  assert.ok(!msg.env.some((e) => e.includes("secretTEST")), "no secret in the message");
  const cred = w.files.files.get(`${hostCommDir(ROOT, uid)}/credentials/s3-csi-credentials`)!;
  assert.match(cred.data, /aws_secret_access_key=secretTEST/);
  assert.deepEqual([cred.mode, cred.uid], [0o600, 1000]);
  assert.equal(w.sys.readAheadKb.size, 1);
  assert.ok(findMount(w.sys.mounts, ta));

  // A second workload shares the source: only a bind.
  const tb = w.target("uid-b", "pv-1");
  assert.equal(await w.publisher.publish(validatePublish(req(tb), ROOT), {}), "bind");
  assert.equal(w.sys.callsOf("mountFuse").length, 1);
  // Publishing again is a no-op.
  assert.equal(await w.publisher.publish(validatePublish(req(tb), ROOT), {}), "already-published");

  assert.equal(await w.publisher.unpublish(ta), "unmounted");
  assert.equal(await w.publisher.unpublish(ta), "not-mounted");
  assert.equal(findMount(w.sys.mounts, ta), undefined);
});

Deno.test("Publisher: a volume's own endpoint (its Secret's) reaches the bucket check and the engine", async () => {
  const probed: ProbeTarget[] = [];
  const probe = {
    probe: (t: ProbeTarget) => (probed.push(t), Promise.resolve({ ok: true as const })),
  };
  await using w = await world({ probe });
  await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const secrets = { endpoint: "https://s3.site-b.example", region: "site-b" };
  const p = validatePublish(req(w.target("uid-a", "pv-1"), { secrets }), ROOT);
  assert.equal(await w.publisher.publish(p, secrets), "source-and-bind");
  assert.deepEqual(
    probed.map((t) => [t.endpoint, t.region, t.accessKeyId]),
    [["https://s3.site-b.example", "site-b", "AKIATEST"]],
  );
  await until(() => w.received.get("mp-1")?.length);
  const env = w.received.get("mp-1")![0]!.env;
  assert.ok(env.includes("AWS_ENDPOINT_URL=https://s3.site-b.example"), env.join(" "));
  assert.ok(env.includes("AWS_REGION=site-b"));
  assert.ok(!env.some((e) => e.includes("s3.local")), "not the driver's endpoint");
  assert.ok(w.received.get("mp-1")![0]!.args.includes("--region=site-b"));
});

Deno.test("Publisher: waits for the assignment and the Running pod by watching", async () => {
  await using w = await world({ timeouts: { attachmentMs: 2000, podRunningMs: 2000 } });
  const t = w.target("uid-a", "pv-1");
  const publishing = w.publisher.publish(validatePublish(req(t), ROOT), {});
  await new Promise((r) => setTimeout(r, 30));
  await w.addMountpointPod("mp-1", "Pending");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  await new Promise((r) => setTimeout(r, 30));
  const pod = (await w.kube.get(PODS, "mp-1", "mount-s3"))!;
  await w.kube.update(PODS, { ...pod, status: { phase: "Running" } });
  assert.equal(await publishing, "source-and-bind");
});

Deno.test("Publisher: clear errors for no assignment and for a failed pod", async () => {
  await using w = await world();
  const t = w.target("uid-a", "pv-1");
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError && e.code === 9 &&
      /No Mountpoint Pod was assigned to pod uid-a/.test(e.message),
  );
  await w.addMountpointPod("mp-f", "Failed");
  await w.assign("pv-1", "mp-f", ["uid-a"]);
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    /Mountpoint Pod mount-s3\/mp-f cannot serve new mounts \(phase Failed/,
  );
  assert.equal(w.sys.callsOf("mountFuse").length, 0);
});

Deno.test("Publisher: a dead source is unmounted and mounted again", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  const source = sourceMountDir(ROOT, "mp-1");
  const dead = new SysError(107, "stat", { path: t });
  w.files.failStat(t, dead);
  w.files.failStat(source, dead);
  // Each mount stays dead until the publisher has unmounted it (then the path answers again):
  // the publish itself decides when, no time window.
  const unmount = w.sys.unmount.bind(w.sys);
  w.sys.unmount = (path, options) => {
    if (path === t || path === source) w.files.failStat(path, undefined);
    return unmount(path, options);
  };
  assert.equal(await w.publisher.publish(validatePublish(req(t), ROOT), {}), "source-and-bind");
  assert.deepEqual(
    w.sys.callsOf("unmount").map((c) => c.args[0]),
    [t, source],
    "the dead target and source were unmounted",
  );
  assert.equal(w.sys.callsOf("mountFuse").length, 2);
  await until(() => w.received.get("mp-1")?.length === 2);
  assert.equal(w.received.get("mp-1")!.length, 2);
});

Deno.test("Publisher: readiness failure unmounts the source and reports mount.error", async () => {
  await using w = await world();
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  w.sys.failNext("waitMountReady", new Error("timed out"));
  const comm = hostCommDir(ROOT, uid);
  const t = w.target("uid-a", "pv-1");
  const publishing = w.publisher.publish(validatePublish(req(t), ROOT), {});
  setTimeout(() => w.files.writeFile(`${comm}/mount.error`, "bucket is gone"), 1);
  await assert.rejects(publishing, /bucket is gone|did not answer/);
  assert.deepEqual(w.sys.mounts.filter((m) => m.fsType === "fuse"), []);
});

Deno.test("Unmounter: needs-unmount writes mount.exit, unmounts the source, removes credentials", async () => {
  await using w = await world();
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const t = w.target("uid-a", "pv-1");
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  const unmounter = w.unmounter();
  const pod = w.pods.pod("mp-1")!;
  assert.equal(await unmounter.unmountPod(pod), "in-use", "a bind still uses the source");
  await w.publisher.unpublish(t);
  const stop = new AbortController();
  unmounter.attach(stop.signal);
  await w.kube.patch(PODS, "mp-1", "mount-s3", {
    metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
  });
  const comm = hostCommDir(ROOT, uid);
  for (let i = 0; i < 100 && findMount(w.sys.mounts, sourceMountDir(ROOT, "mp-1")); i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  stop.abort();
  await w.locks.run("mp-1", () => {});
  assert.equal(findMount(w.sys.mounts, sourceMountDir(ROOT, "mp-1")), undefined);
  assert.ok(w.files.files.has(`${comm}/mount.exit`));
  assert.equal([...w.files.files.keys()].some((k) => k.includes("/credentials/")), false);
});

Deno.test("Unmounter: startup removes orphaned and dead sources", async () => {
  await using w = await world();
  await w.addMountpointPod("mp-live");
  await w.assign("pv-1", "mp-live", ["uid-a"]);
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const orphan = sourceMountDir(ROOT, "mp-gone");
  w.files.addDir(orphan);
  const fd = w.sys.openFuse();
  await w.sys.mountFuse(orphan, { fd });
  const unmounter = w.unmounter({ locks: new KeyedMutex() });
  assert.deepEqual(await unmounter.cleanAtStartup(), ["mp-gone"]);
  assert.equal(findMount(w.sys.mounts, orphan), undefined);
  assert.ok(findMount(w.sys.mounts, sourceMountDir(ROOT, "mp-live")), "live source kept");
  w.files.failStat(sourceMountDir(ROOT, "mp-live"), new SysError(107, "stat"));
  assert.deepEqual(await unmounter.cleanAtStartup(), ["mp-live"]);
});

Deno.test("Unmounter: startup detaches the runtime's copies of sources (the socket dir's mnt/)", async () => {
  await using w = await world();
  await w.addMountpointPod("mp-live");
  await w.assign("pv-1", "mp-live", ["uid-a"]);
  const target = w.target("uid-a", "pv-1");
  await w.publisher.publish(validatePublish(req(target), ROOT), {});
  const source = sourceMountDir(ROOT, "mp-live");
  // What the runtime did when it started the container: the plugin dir, with its mnt/, at /csi.
  await w.sys.bindMount(source, "/csi/mnt/mp-live");
  // Not a copy: another path of the same connection that does not look like a source dir.
  await w.sys.bindMount(source, "/elsewhere/mp-live");
  const unmounter = w.unmounter();
  assert.deepEqual(await unmounter.cleanAtStartup(), []);
  assert.deepEqual(w.sys.callsOf("unmount").map((c) => c.args[0]), ["/csi/mnt/mp-live"]);
  assert.ok(findMount(w.sys.mounts, source), "the source stays");
  assert.ok(findMount(w.sys.mounts, target), "the workload's target stays");
  assert.ok(findMount(w.sys.mounts, "/elsewhere/mp-live"), "other references are not copies");
});

Deno.test("Unmounter: a copy of the source (/csi/mnt/<pod>) is no reference; it goes with the source", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  const source = sourceMountDir(ROOT, "mp-1");
  await w.sys.bindMount(source, "/csi/mnt/mp-1");
  await w.publisher.unpublish(t);
  const unmounter = w.unmounter();
  assert.equal(await unmounter.unmountPod(w.pods.pod("mp-1")!), "unmounted");
  assert.equal(findMount(w.sys.mounts, source), undefined);
  assert.equal(findMount(w.sys.mounts, "/csi/mnt/mp-1"), undefined, "the copy is detached too");
});

Deno.test("Unmounter: startup never waits for a needs-unmount source in use; it unmounts it once free", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  await w.kube.patch(PODS, "mp-1", "mount-s3", {
    metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
  });
  for (let i = 0; i < 100 && !w.pods.pod("mp-1")?.metadata?.annotations; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const unmounter = w.unmounter({ inUseWaitMs: 60_000 });
  const source = sourceMountDir(ROOT, "mp-1");
  // The target (the kubelet unpublishes it only once the plugin serves) still holds the source.
  assert.deepEqual(await unmounter.cleanAtStartup(), []);
  assert.ok(findMount(w.sys.mounts, source), "still mounted: in use");
  await w.publisher.unpublish(t);
  for (let i = 0; i < 400 && findMount(w.sys.mounts, source); i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.equal(findMount(w.sys.mounts, source), undefined, "unmounted in the background");
  await w.locks.run("mp-1", () => {});
});

Deno.test("Publisher: a Mountpoint Pod that is not what the controller renders gets no credentials and no FUSE connection", async () => {
  await using w = await world();
  const uid = await w.addMountpointPod("mp-1", "Running", { driverVersion: DRIVER_VERSION });
  // Someone else's pod under the expected name: another image.
  const pod = (await w.kube.get<Pod>(PODS, "mp-1", "mount-s3"))!;
  pod.spec.containers[0]!.image = "attacker/keys:latest";
  await w.kube.update(PODS, pod);
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const t = w.target("uid-a", "pv-1");
  await until(() => w.pods.pod("mp-1")?.spec?.containers?.[0]?.image === "attacker/keys:latest");
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError && e.code === 9 &&
      /Mountpoint Pod mount-s3\/mp-1 is not the pod the controller renders \(image is "attacker\/keys:latest", not "s3-csi-mounter:test"\)/
        .test(e.message),
  );
  const comm = hostCommDir(ROOT, uid);
  assert.equal(w.files.files.has(`${comm}/credentials/s3-csi-credentials`), false, "no keys");
  assert.deepEqual(w.sys.callsOf("mountFuse"), [], "no FUSE mount");
  assert.equal(w.received.get("mp-1"), undefined, "nothing sent to the pod");
  const after = await w.kube.get<Pod>(PODS, "mp-1", "mount-s3");
  assert.equal(
    after?.metadata.annotations?.[ANNOTATION_BROKEN],
    undefined,
    "a pod of this driver version that differs is only refused, never marked for replacement",
  );
});

Deno.test("Publisher: a Mountpoint Pod of another driver version it cannot use, with nothing mounted from it, is marked for replacement", async () => {
  await using w = await world();
  await w.addMountpointPod("mp-1", "Running", { driverVersion: "0.0.1-old" });
  // The old controller's pod, of the old image: assigned before this node plugin took over.
  const pod = (await w.kube.get<Pod>(PODS, "mp-1", "mount-s3"))!;
  pod.spec.containers[0]!.image = "s3-csi-mounter:0.0.1-old";
  await w.kube.update(PODS, pod);
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const t = w.target("uid-a", "pv-1");
  await until(() =>
    w.pods.pod("mp-1")?.spec?.containers?.[0]?.image === "s3-csi-mounter:0.0.1-old"
  );
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError && e.code === 9 &&
      /is not the pod the controller renders \(image is "s3-csi-mounter:0\.0\.1-old".*\. It was made for driver 0\.0\.1-old, which this node plugin \(driver .+\) cannot use, and nothing is mounted from it on this node: the controller replaces it/
        .test(e.message),
  );
  assert.deepEqual(w.sys.callsOf("mountFuse"), [], "no FUSE mount");
  const after = await w.kube.get<Pod>(PODS, "mp-1", "mount-s3");
  assert.match(
    after?.metadata.annotations?.[ANNOTATION_BROKEN] ?? "not marked",
    /^The node plugin asked for a replacement: the pod was made for driver 0\.0\.1-old/,
  );
});

Deno.test("Publisher: no-sign-request gives the pod no credentials; the volume's user agent comes first; the probe gets the request options", async () => {
  const probes: ProbeTarget[] = [];
  const probe: BucketProbe = {
    probe: (target) => {
      probes.push(target);
      return Promise.resolve({ ok: true });
    },
  };
  await using w = await world({ probe });
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const flags = [
    "no-sign-request",
    "read-only",
    "requester-pays",
    "expected-bucket-owner=111122223333",
    "user-agent-prefix=my-team/1.0",
    "allow-root",
  ];
  const p = validatePublish(
    req(w.target("uid-a", "pv-1"), {
      volumeCapability: {
        mount: { mountFlags: flags },
        accessMode: { mode: "MULTI_NODE_READER_ONLY" as const },
      },
    }),
    ROOT,
  );
  assert.equal(await w.publisher.publish(p, {}), "source-and-bind");
  await until(() => w.received.get("mp-1")?.length);
  const msg = w.received.get("mp-1")![0]!;
  assert.ok(!msg.env.some((e) => e.startsWith("AWS_SHARED_CREDENTIALS_FILE=")), msg.env.join(" "));
  assert.ok(!msg.env.some((e) => e.startsWith("AWS_PROFILE=")));
  assert.equal(
    w.files.files.get(`${hostCommDir(ROOT, uid)}/credentials/s3-csi-credentials`),
    undefined,
    "no credentials written for an unsigned volume",
  );
  assert.ok(msg.args.includes("--allow-root") && !msg.args.includes("--allow-other"));
  assert.ok(
    msg.args.some((a) =>
      /^--user-agent-prefix=my-team\/1\.0 s3-csi-driver\/\S+ credential-source#none$/.test(a)
    ),
    msg.args.join(" "),
  );
  assert.deepEqual(
    {
      anonymous: probes[0]!.anonymous,
      requesterPays: probes[0]!.requesterPays,
      owner: probes[0]!.expectedBucketOwner,
    },
    { anonymous: true, requesterPays: true, owner: "111122223333" },
  );
});
