import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import type { KubeObject } from "../kube/client.ts";
import { PODS } from "../kube/resources.ts";
import { ANNOTATION_MOUNT_PROTOCOLS } from "../mppod/mount_protocol.ts";
import { ANNOTATION_BROKEN } from "../mppod/labels.ts";
import { hostCommDir, sessionsDir, sourceMountDir } from "../mppod/paths.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { Custody } from "./custody.ts";
import { findMount } from "../sys/mountinfo.ts";
import { validatePublish } from "./publish_request.ts";
import { ROOT, world } from "./_test_fixtures.ts";

const req = (target: string, engine?: string) => ({
  volumeId: "vol-pv-1",
  targetPath: target,
  volumeCapability: {
    mount: { mountFlags: ["allow-delete"] },
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  },
  volumeContext: { bucketName: "bucket-1", ...(engine ? { engine } : {}) },
});

async function sessionWorld() {
  const w = await world();
  await w.addMountpointPod("mp-1", "Running", { sessions: true });
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  return w;
}

const NEVER = new AbortController().signal;

/** The messages the fake mounter of `mp` received, once it received `n`. */
async function received(w: Awaited<ReturnType<typeof world>>, mp: string, n = 1) {
  for (let i = 0; i < 500 && (w.received.get(mp)?.length ?? 0) < n; i++) {
    await new Promise((r) => setTimeout(r, 2));
  }
  return w.received.get(mp) ?? [];
}

Deno.test("Custody: a protocol-2 pod's mount-s3 source is held, with a session", async () => {
  await using w = await sessionWorld();
  const t = w.target("uid-a", "pv-1");
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  const fd = (w.sys.callsOf("mountFuse")[0]!.args[1] as { fd: number }).fd;
  assert.ok(w.custody.has("mp-1"));
  assert.ok(w.sys.fds.has(fd), "the node plugin keeps the fd it opened");
  assert.ok(!w.sys.callsOf("closeFd").some((c) => c.args[0] === fd));
  const msg = (await received(w, "mp-1"))[0]!;
  assert.equal(msg.protocolVersion, 2);
  assert.match(msg.session!.id, /^[0-9a-f]{32}$/);
  assert.equal(msg.session!.resume, false);
  assert.equal(
    await w.custody.check("mp-1", NEVER),
    "idle",
    "no mounter waits: the supervisor runs",
  );
});

Deno.test("Custody: a restarted Mountpoint container gets the same connection back, resumed", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const first = (await received(w, "mp-1"))[0]!;
  w.restartMounter("mp-1");
  assert.equal(await w.custody.check("mp-1", NEVER), "resent");
  const again = (await received(w, "mp-1", 2))[1]!;
  assert.deepEqual(again, { ...first, session: { id: first.session!.id, resume: true } });
  assert.equal(await w.custody.check("mp-1", NEVER), "idle");
  assert.equal(w.sys.callsOf("mountFuse").length, 1, "the kernel mount is never made again");
});

Deno.test("Custody: a mounter that keeps refusing gets the connection aborted, then released", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const source = findMount(w.sys.mounts, sourceMountDir(ROOT, "mp-1"))!;
  w.restartMounter("mp-1", { refuse: "Mount message protocol 2 is not supported" });
  const outcomes = [];
  for (let i = 0; i < 3; i++) {
    // After a refusal the custody pauses (20 ms × refusals in the fixture) before trying again.
    outcomes.push(await w.custody.check("mp-1", NEVER));
    await new Promise((r) => setTimeout(r, 20 * (i + 1) + 10));
  }
  assert.deepEqual(outcomes, ["refused", "refused", "aborted"]);
  assert.deepEqual(w.sys.abortedConnections, [source.minor]);
  assert.ok(!w.custody.has("mp-1"));
});

/** Change Mountpoint Pod `mp` as an API client would (an image patch, a debug container, a resize). */
async function editPod(
  w: Awaited<ReturnType<typeof world>>,
  mp: string,
  edit: (spec: Record<string, unknown>) => void,
) {
  const pod = (await w.kube.get<KubeObject>(PODS, mp, "mount-s3"))!;
  edit(pod.spec as Record<string, unknown>);
  await w.kube.update(PODS, pod);
}

for (
  const [what, edit, names] of [
    ["another image", (s: Record<string, unknown>) => {
      (s.containers as { image: string }[])[0]!.image = "evil:latest";
    }, /containers was .*, is .*evil:latest/],
    ["an ephemeral debug container", (s: Record<string, unknown>) => {
      s.ephemeralContainers = [{
        name: "debug",
        image: "busybox",
        targetContainerName: "mountpoint",
      }];
    }, /ephemeralContainers was \[\], is .*busybox/],
  ] as const
) {
  Deno.test(`Custody: a restarted container of a pod changed since (${what}) does not get the connection`, async () => {
    await using w = await sessionWorld();
    await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
    const source = findMount(w.sys.mounts, sourceMountDir(ROOT, "mp-1"))!;
    await editPod(w, "mp-1", edit);
    w.restartMounter("mp-1");
    assert.equal(await w.custody.check("mp-1", NEVER), "aborted");
    assert.equal((await received(w, "mp-1")).length, 1, "no second hand-over");
    assert.deepEqual(w.sys.abortedConnections, [source.minor], "its workloads get errors");
    assert.ok(!w.custody.has("mp-1"));
    const broken = (await w.kube.get<KubeObject>(PODS, "mp-1", "mount-s3"))!.metadata!
      .annotations?.[ANNOTATION_BROKEN];
    assert.match(broken ?? "", names, "marked broken, naming what changed");
  });
}

Deno.test("Custody: a resized container (resources) gets the connection back", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  await editPod(w, "mp-1", (s) => {
    (s.containers as { resources?: unknown }[])[0]!.resources = { limits: { memory: "2Gi" } };
  });
  w.restartMounter("mp-1");
  assert.equal(await w.custody.check("mp-1", NEVER), "resent");
});

Deno.test("Custody: a pod deleted and made again under its name does not get the connection", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const pod = (await w.kube.get<KubeObject>(PODS, "mp-1", "mount-s3"))!;
  await w.kube.delete(PODS, "mp-1", "mount-s3");
  await w.kube.create(PODS, { ...pod, metadata: { ...pod.metadata, uid: undefined } });
  w.restartMounter("mp-1");
  assert.equal(await w.custody.check("mp-1", NEVER), "released");
  assert.equal((await received(w, "mp-1")).length, 1);
});

Deno.test("Custody: a restarted node plugin takes its sessions back from their supervisors", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const first = (await received(w, "mp-1"))[0]!;
  // The node plugin dies: its fds close; its records stay.
  w.custody.closeAll();
  assert.ok(!w.custody.has("mp-1"));
  const restarted = new Custody({
    sys: w.sys,
    files: w.files,
    kubeletRoot: ROOT,
    locks: new KeyedMutex(),
    pods: w.pods,
    answerMs: 300,
  });
  assert.deepEqual(await restarted.recover(NEVER), ["mp-1"]);
  assert.ok(restarted.has("mp-1"));
  // And it serves as before: a restarted container gets the connection back.
  w.restartMounter("mp-1");
  assert.equal(await restarted.check("mp-1", NEVER), "resent");
  const again = (await received(w, "mp-1", 2))[1]!;
  assert.deepEqual(again.session, { id: first.session!.id, resume: true });
  restarted.closeAll();
});

Deno.test("Custody: a record whose source is gone is dropped, not taken back", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  w.custody.closeAll();
  await w.sys.unmount(sourceMountDir(ROOT, "mp-1"), { detach: true }); // e.g. a node reboot
  const restarted = new Custody({
    sys: w.sys,
    files: w.files,
    kubeletRoot: ROOT,
    locks: new KeyedMutex(),
    pods: w.pods,
  });
  assert.deepEqual(await restarted.recover(NEVER), []);
  assert.equal(await w.files.readDir(sessionsDir(ROOT)).then((n) => n.length), 0);
});

Deno.test("Custody: a supervisor that gave its engine up gets its pod marked broken, once", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const uid = w.pods.pod("mp-1")!.metadata!.uid!;
  await received(w, "mp-1");
  // The mounter became the supervisor: its socket is gone.
  for (let i = 0; i < 500 && await w.files.stat(`${hostCommDir(ROOT, uid)}/mount.sock`); i++) {
    await new Promise((r) => setTimeout(r, 2));
  }
  await w.files.writeFile(
    `${hostCommDir(ROOT, uid)}/mount.error`,
    "mount-s3 was killed by SIGKILL and was not started again: it failed 6 times within 60 s (last: no output); the volume answers EIO until it is mounted again\n",
  );
  assert.equal(await w.custody.check("mp-1", NEVER), "given-up");
  for (let i = 0; i < 100 && !w.pods.pod("mp-1")?.metadata?.annotations?.[ANNOTATION_BROKEN]; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.match(
    w.pods.pod("mp-1")!.metadata!.annotations![ANNOTATION_BROKEN]!,
    /its engine was given up: mount-s3 was killed by SIGKILL .* failed 6 times within 60 s/,
  );
  assert.equal(await w.custody.check("mp-1", NEVER), "idle", "marked once");
});

Deno.test("Custody: released when its source goes (unmounter) or is another connection", async () => {
  await using w = await sessionWorld();
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {});
  const fd = (w.sys.callsOf("mountFuse")[0]!.args[1] as { fd: number }).fd;
  // The source unmounted behind our back (another connection would have another st_dev).
  await w.sys.unmount(sourceMountDir(ROOT, "mp-1"), { detach: true });
  assert.equal(await w.custody.check("mp-1", NEVER), "released");
  assert.ok(!w.sys.fds.has(fd), "its fd is closed");
});

Deno.test("Custody: rclone and protocol-1 pods keep the old hand-over (no session, fd closed)", async (t) => {
  await t.step("rclone", async () => {
    await using w = await sessionWorld();
    await w.publisher.publish(
      validatePublish(
        {
          ...req(w.target("uid-a", "pv-1"), "rclone"),
          volumeCapability: {
            mount: { mountFlags: ["allow-delete", "allow-overwrite"] },
            accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
          },
        },
        ROOT,
      ),
      {},
    );
    assert.ok(!w.custody.has("mp-1"));
    assert.equal((await received(w, "mp-1"))[0]!.session, undefined);
  });
  await t.step("protocol 1", async () => {
    await using w = await world();
    const t1 = await w.attachOne();
    await w.publisher.publish(validatePublish(req(t1), ROOT), {});
    assert.ok(!w.custody.has("mp-1"));
    assert.equal((await received(w, "mp-1"))[0]!.protocolVersion, undefined);
  });
});

Deno.test("Publisher: a pod speaking no common protocol is refused, naming both ranges", async () => {
  await using w = await world();
  await w.addMountpointPod("mp-1");
  const pod = w.pods.pod("mp-1")!;
  await w.kube.patch(PODS, "mp-1", pod.metadata!.namespace!, {
    metadata: { annotations: { [ANNOTATION_MOUNT_PROTOCOLS]: "5-6" } },
  }, { type: "merge" });
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  for (let i = 0; i < 100 && !w.pods.pod("mp-1")?.metadata?.annotations; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  await assert.rejects(
    w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1")), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError &&
      /speaks mount protocols 5-6 and this node plugin 1-2/.test(e.message),
  );
  assert.equal(w.sys.callsOf("mountFuse").length, 0, "nothing mounted");
});
