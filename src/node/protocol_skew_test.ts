/**
 * The skew policy (README "Upgrades and version skew"), between this node plugin (release N, mount
 * protocols 1-2) and Mountpoint Pods of the releases before and after it, whose fake mounters
 * parse what they get with their own range (`parseMountMessage(bytes, range)`): N−1 and N+1 work,
 * further apart is refused before any key or FUSE connection is given, naming both driver versions
 * and both ranges. (A mounter refusing a message of a protocol it does not speak, naming its range:
 * `src/mppod/mount_message_test.ts`.)
 */
import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { PODS } from "../kube/resources.ts";
import type { Pod } from "../kube/types.ts";
import { ANNOTATION_BROKEN } from "../mppod/labels.ts";
import { CREDENTIALS_DIR, hostCommDir } from "../mppod/paths.ts";
import { OUR_PROTOCOLS } from "../mppod/mount_protocol.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { CREDENTIALS_FILE } from "./credentials.ts";
import { validatePublish } from "./publish_request.ts";
import { ROOT, world } from "./_test_fixtures.ts";

const req = (target: string, engine = "mount-s3") => ({
  volumeId: "vol-pv-1",
  targetPath: target,
  volumeCapability: {
    mount: { mountFlags: ["allow-delete", "allow-overwrite"] },
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  },
  volumeContext: { bucketName: "bucket-1", engine },
});

/** A world with one Mountpoint Pod of another release and a workload assigned to it. */
async function skewWorld(protocols?: { min: number; max: number }, driverVersion = "9.9.9") {
  const w = await world();
  await w.addMountpointPod("mp-1", "Running", {
    ...(protocols ? { protocols } : {}),
    driverVersion,
  });
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  return w;
}

/** Publish the workload's volume; resolves with the message its mounter received. */
async function publish(w: Awaited<ReturnType<typeof world>>, engine?: string) {
  await w.publisher.publish(validatePublish(req(w.target("uid-a", "pv-1"), engine), ROOT), {});
  for (let i = 0; i < 500 && !w.received.get("mp-1")?.length; i++) {
    await new Promise((r) => setTimeout(r, 2));
  }
  const [m] = w.received.get("mp-1") ?? [];
  assert.ok(m, "the mounter received a message");
  return m;
}

Deno.test("skew: this node plugin speaks mount protocols 1-2", () => {
  assert.deepEqual(OUR_PROTOCOLS, { min: 1, max: 2 }, "update the cases below with a new protocol");
});

Deno.test("skew: a Mountpoint Pod one release older (protocol 1, no annotation) works", async (t) => {
  for (const engine of ["mount-s3", "rclone"]) {
    await t.step(engine, async () => {
      await using w = await skewWorld(undefined, "0.0.9");
      const m = await publish(w, engine);
      assert.equal(m.protocolVersion, undefined, "the upstream message, which names none");
      assert.equal(m.session, undefined);
    });
  }
});

Deno.test("skew: a Mountpoint Pod one release newer (protocols 2-3) works, with protocol 2 on the wire", async (t) => {
  for (const engine of ["mount-s3", "rclone"]) {
    await t.step(engine, async () => {
      await using w = await skewWorld({ min: 2, max: 3 });
      // Its mounter refuses a message without protocolVersion (1): rclone's too must carry 2.
      const m = await publish(w, engine);
      assert.equal(m.protocolVersion, 2);
      assert.equal(m.session !== undefined, engine === "mount-s3", "a session for mount-s3 only");
    });
  }
});

Deno.test("skew: Mountpoint Pods two releases apart are refused before keys, naming both versions", async (t) => {
  for (
    const [range, text] of [
      [{ min: 3, max: 4 }, "speaks mount protocols 3-4 and this node plugin 1-2"],
    ] as const
  ) {
    await t.step(text, async () => {
      await using w = await skewWorld(range, "9.9.9");
      await assert.rejects(publish(w), (e: unknown) => {
        assert.ok(e instanceof CsiError, String(e));
        assert.equal(e.code, 9, "FailedPrecondition");
        assert.match(
          e.message,
          new RegExp(
            `Mountpoint Pod .*/mp-1 \\(driver 9\\.9\\.9\\) cannot be used by this node plugin \\(driver ${
              DRIVER_VERSION.replaceAll(".", "\\.")
            }\\): the Mountpoint Pod ${text}: run a node plugin and a Mountpoint image at most one release apart.*\\. It was made for driver 9\\.9\\.9, .*: the controller replaces it`,
          ),
        );
        return true;
      });
      assert.equal(w.sys.callsOf("mountFuse").length, 0, "nothing mounted");
      assert.equal(w.received.get("mp-1"), undefined, "no message sent");
      const pod = w.pods.pod("mp-1")!;
      const creds = `${
        hostCommDir(ROOT, pod.metadata!.uid!)
      }/${CREDENTIALS_DIR}/${CREDENTIALS_FILE}`;
      assert.equal(await w.files.readTextFile(creds), undefined, "no keys written");
      // Nothing is mounted from the pod of another release on this node: the controller is asked
      // to replace it (a rollout's leftover), and the error says so.
      const marked = await w.kube.get<Pod>(PODS, "mp-1", "mount-s3");
      assert.match(
        marked?.metadata.annotations?.[ANNOTATION_BROKEN] ?? "not marked",
        /asked for a replacement: the pod was made for driver 9\.9\.9/,
      );
    });
  }
});
