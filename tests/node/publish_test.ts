/**
 * Node plugin process tests on the real kernel: real FUSE (rclone mount2 on /dev/fd/N in a mounter
 * running as uid 1000), real S3 (RGW), the API emulator playing the cluster. Run as root.
 */
import assert from "node:assert/strict";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import type { KubeObject } from "../../src/kube/client.ts";
import { PODS } from "../../src/kube/resources.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import { findMount, readMountInfo } from "../../src/sys/mountinfo.ts";
import { exists, waitFor } from "../_helpers.ts";
import { kubeletMkdirParent, nodeTest, startHarness } from "../testbed/harness/node_harness.ts";

const PV = "pv-shared";

nodeTest(
  "two pods on one volume: one FUSE mount, two binds, shared data in S3; unpublish and needs-unmount leave nothing",
  async () => {
    await using h = await startHarness();
    const mp = await h.mountpointPod("mp-shared");
    await h.assign(PV, `vol-${PV}`, mp.name, ["uid-a", "uid-b"]);
    const [ta, tb] = [h.target("uid-a", PV), h.target("uid-b", PV)];
    for (const uid of ["uid-a", "uid-b"]) {
      await kubeletMkdirParent(h.target(uid, PV));
      await h.csi.node.nodePublishVolume(h.publishRequest(uid, PV));
    }
    const mounts = await readMountInfo();
    const source = `${h.root}/plugins/s3.csi.scality.com/mnt/${mp.name}`;
    const fuse = mounts.filter((m) => m.fsType === "fuse" && m.mountPoint.startsWith(h.root));
    const src = findMount(mounts, source)!;
    assert.ok(src, "source mount exists");
    assert.equal(src.source, "mountpoint-s3");
    assert.equal(new Set(fuse.map((m) => m.majorMinor)).size, 1, "one FUSE connection");
    assert.deepEqual(fuse.map((m) => m.mountPoint).sort(), [source, ta, tb].sort());
    assert.ok(findMount(mounts, ta)!.mountOptions.includes("nosuid"));

    await Deno.writeTextFile(`${ta}/hello.txt`, "written by pod a\n");
    assert.equal(await Deno.readTextFile(`${tb}/hello.txt`), "written by pod a\n");
    const obj = await h.s3.send(new GetObjectCommand({ Bucket: h.bucket, Key: "hello.txt" }));
    assert.equal(await obj.Body!.transformToString(), "written by pod a\n");

    const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: `vol-${PV}`, volumePath: ta });
    assert.equal(stats.volumeCondition?.abnormal, false);
    // Publishing again is a no-op success.
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-a", PV));

    for (const t of [ta, tb]) {
      await h.csi.node.nodeUnpublishVolume({ volumeId: `vol-${PV}`, targetPath: t });
      await h.csi.node.nodeUnpublishVolume({ volumeId: `vol-${PV}`, targetPath: t }); // idempotent
      assert.equal(await exists(t), false);
    }
    assert.deepEqual(await h.ourMounts(), [source], "only the source is left");
    assert.ok(await exists(`${mp.commDir}/credentials/s3-csi-credentials`));

    // The controller marks the pod; the unmounter ends it cleanly.
    const pod = await h.kube.get<KubeObject>(PODS, mp.name, "mount-s3");
    await h.kube.patch(PODS, mp.name, "mount-s3", {
      metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
    }, { type: "merge" });
    assert.ok(pod);
    const code = await waitFor("the mounter to exit", async () => {
      const s = await Promise.race([
        mp.mounter.child.status,
        new Promise<undefined>((r) => setTimeout(() => r(undefined), 100)),
      ]);
      return s ? { code: s.code } : undefined;
    }, { timeoutMs: 30_000 });
    assert.equal(code.code, 0, `mounter exit 0; log: ${mp.mounter.stderr().slice(-1500)}`);
    assert.deepEqual(await h.ourMounts(), [], "no mount of ours left");
    // The node plugin removes the credentials after the unmount, which already ended the mounter.
    await waitFor(
      "the credentials removed",
      async () => !(await exists(`${mp.commDir}/credentials`)),
      {
        timeoutMs: 10_000,
      },
    );
    assert.equal(await exists(source), false, "source dir removed");
  },
);
