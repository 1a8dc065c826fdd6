/**
 * What the publisher does with a mount that does not answer (issue "node boundary, round 2", 1):
 * a held session is given time to resume; a hung connection it gives up is aborted first (so its
 * probe and its callers end); "not checked" is never a reason to unmount; remounts of one pod are
 * bounded, then the pod is marked broken for the controller.
 */
import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { ANNOTATION_BROKEN } from "../mppod/labels.ts";
import { sourceMountDir } from "../mppod/paths.ts";
import { SysError } from "../sys/errno.ts";
import { findMount } from "../sys/mountinfo.ts";
import { MAX_REMOUNTS } from "./publisher.ts";
import { validatePublish } from "./publish_request.ts";
import { ROOT, world } from "./_test_fixtures.ts";

const req = (target: string) => ({
  volumeId: "vol-pv-1",
  targetPath: target,
  volumeCapability: {
    mount: { mountFlags: ["allow-delete"] },
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  },
  volumeContext: { bucketName: "bucket-1" },
});

const SOURCE = sourceMountDir(ROOT, "mp-1");

Deno.test("Publisher: a hung source whose session is held is left to resume; its targets stay", async () => {
  await using w = await world();
  await w.addMountpointPod("mp-1", "Running", { sessions: true });
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const t = w.target("uid-a", "pv-1");
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  assert.ok(w.custody.has("mp-1"));
  // The engine is being restarted: nothing answers for a while.
  w.files.hang(SOURCE);
  w.files.hang(t);
  const unmountsBefore = w.sys.callsOf("unmount").length;
  assert.equal(await w.publisher.publish(validatePublish(req(t), ROOT), {}), "already-published");
  assert.equal(w.sys.callsOf("unmount").length, unmountsBefore, "nothing unmounted");
  assert.deepEqual(w.sys.abortedConnections, [], "nothing aborted");
  assert.ok(w.custody.has("mp-1"));
});

Deno.test("Publisher: a hung source without a held session is aborted before it is mounted again", async () => {
  await using w = await world();
  const t = await w.attachOne(); // protocol 1: no session, no custody
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  const old = findMount(w.sys.mounts, SOURCE)!;
  w.files.hang(SOURCE);
  w.files.hang(t);
  assert.equal(await w.publisher.publish(validatePublish(req(t), ROOT), {}), "source-and-bind");
  assert.deepEqual(w.sys.abortedConnections, [old.minor], "the old connection is aborted");
  assert.notEqual(findMount(w.sys.mounts, SOURCE)!.minor, old.minor, "a new connection");
});

Deno.test("Publisher: a check not made (too many mounts hang) never unmounts a target", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  // 64 other mounts hang and hold every probe slot.
  for (let i = 0; i < 64; i++) {
    w.files.addDir(`/hung-${i}`);
    w.files.hang(`/hung-${i}`);
    void w.health.check(`/hung-${i}`, `other-${i}`);
  }
  assert.equal(w.health.inFlight, 64);
  const unmountsBefore = w.sys.callsOf("unmount").length;
  assert.equal(await w.publisher.publish(validatePublish(req(t), ROOT), {}), "already-published");
  assert.equal(w.sys.callsOf("unmount").length, unmountsBefore);
  for (let i = 0; i < 64; i++) w.files.hang(`/hung-${i}`, false);
});

Deno.test("Publisher: remounts of one pod are bounded, then the pod is marked broken", async () => {
  await using w = await world();
  const t = await w.attachOne();
  await w.publisher.publish(validatePublish(req(t), ROOT), {});
  const dead = new SysError(107, "stat", { path: SOURCE });
  for (let i = 0; i < MAX_REMOUNTS; i++) {
    w.files.failStat(SOURCE, dead);
    w.files.failStat(t, dead);
    const publishing = w.publisher.publish(validatePublish(req(t), ROOT), {});
    // The new mount answers again.
    const outcome = await publishing.finally(() => {
      w.files.failStat(SOURCE, undefined);
      w.files.failStat(t, undefined);
    });
    assert.equal(outcome, "source-and-bind", `remount ${i + 1}`);
  }
  w.files.failStat(SOURCE, dead);
  w.files.failStat(t, dead);
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError &&
      /Mountpoint Pod mp-1 was given up: its FUSE mount stopped answering 4 times within 10 minutes/
        .test(e.message),
  );
  for (let i = 0; i < 100 && !w.pods.pod("mp-1")?.metadata?.annotations?.[ANNOTATION_BROKEN]; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.match(
    w.pods.pod("mp-1")!.metadata!.annotations![ANNOTATION_BROKEN]!,
    /gave this pod up: its FUSE mount stopped answering 4 times/,
  );
  // A broken pod is never mounted through again, until the controller replaced it.
  w.files.failStat(SOURCE, undefined);
  w.files.failStat(t, undefined);
  const mounts = w.sys.callsOf("mountFuse").length;
  await assert.rejects(
    w.publisher.publish(validatePublish(req(t), ROOT), {}),
    (e: unknown) =>
      e instanceof CsiError && /is marked broken .*the controller replaces it/.test(e.message),
  );
  assert.equal(w.sys.callsOf("mountFuse").length, mounts);
});
