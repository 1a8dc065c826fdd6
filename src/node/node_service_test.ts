import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { SysError } from "../sys/errno.ts";
import { hostCommDir, MOUNT_ERROR } from "../mppod/paths.ts";
import { ROOT, world } from "./_test_fixtures.ts";

Deno.test("NodeService.nodeGetInfo() returns the node id without topology", async () => {
  await using w = await world();
  assert.deepEqual(await w.service().nodeGetInfo(), { nodeId: "node-1" });
});

Deno.test("NodeService.nodeGetCapabilities() offers mount group, stats and condition", async () => {
  await using w = await world();
  const caps = await w.service().nodeGetCapabilities();
  assert.deepEqual(caps.capabilities?.map((c) => c.rpc?.type), [
    "VOLUME_MOUNT_GROUP",
    "GET_VOLUME_STATS",
    "VOLUME_CONDITION",
  ]);
});

Deno.test("NodeService publish, stats (healthy, dead, not mounted), unpublish", async () => {
  await using w = await world();
  const observed: string[] = [];
  const svc = w.service({
    observePublish: (r) => observed.push(`publish:${r}`),
    observeUnpublish: (r) => observed.push(`unpublish:${r}`),
  });
  const t = await w.attachOne();
  await svc.nodePublishVolume({
    volumeId: "vol-pv-1",
    targetPath: t,
    volumeCapability: { mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
    volumeContext: { bucketName: "bucket-1" },
  });
  const ok = await svc.nodeGetVolumeStats({ volumeId: "vol-pv-1", volumePath: t });
  assert.equal(ok.volumeCondition?.abnormal, false);
  // kubelet refuses a stats answer without any usage entry.
  assert.deepEqual(ok.usage, [{ unit: "BYTES" }]);
  w.files.failStat(t, new SysError(107, "stat", { path: t }));
  const dead = await svc.nodeGetVolumeStats({ volumeId: "vol-pv-1", volumePath: t });
  assert.equal(dead.volumeCondition?.abnormal, true);
  assert.match(dead.volumeCondition?.message ?? "", /not connected.*repaired on the next/);
  assert.deepEqual(dead.usage, [{ unit: "BYTES" }]);
  w.files.failStat(t, undefined);
  await svc.nodeUnpublishVolume({ volumeId: "vol-pv-1", targetPath: t });
  await assert.rejects(
    svc.nodeGetVolumeStats({ volumeId: "vol-pv-1", volumePath: t }),
    (e: unknown) => e instanceof CsiError && e.code === 5,
  );
  await assert.rejects(svc.nodePublishVolume({ volumeId: "v" }), /Target path not provided/);
  assert.deepEqual(observed, ["publish:OK", "unpublish:OK", "publish:INVALID_ARGUMENT"]);
});

Deno.test("NodeService.nodeGetVolumeStats() answers InvalidArgument for missing fields, NotFound for a path that is no target", async () => {
  await using w = await world();
  const svc = w.service();
  const code = (n: number) => (e: unknown) => e instanceof CsiError && e.code === n;
  await assert.rejects(svc.nodeGetVolumeStats({ volumePath: w.target("uid-a", "pv-1") }), code(3));
  await assert.rejects(svc.nodeGetVolumeStats({ volumeId: "vol-pv-1" }), code(3));
  await assert.rejects(svc.nodeGetVolumeStats({ volumeId: "v", volumePath: "some/path" }), code(5));
  await assert.rejects(
    svc.nodeGetVolumeStats({ volumeId: "v", volumePath: `${ROOT}/pods/uid-a/volumes` }),
    code(5),
  );
  await assert.rejects(
    svc.nodeGetVolumeStats({ volumeId: "v", volumePath: w.target("uid-a", "pv-1") }),
    code(5),
  );
});

Deno.test("NodeService.nodeGetVolumeStats(): the pod's report loses the access key id and proxy credentials", async () => {
  await using w = await world();
  const svc = w.service();
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a"]);
  const t = w.target("uid-a", "pv-1");
  await svc.nodePublishVolume({
    volumeId: "vol-pv-1",
    targetPath: t,
    volumeCapability: { mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
    volumeContext: { bucketName: "bucket-1" },
  });
  await w.files.writeFile(
    `${hostCommDir(ROOT, uid)}/${MOUNT_ERROR}`,
    "mount-s3 exited with code 1\n" +
      "InvalidAccessKeyId: access key AKIATEST (also AKIAIOSFODNN7EXAMPLE) through proxy http://proxyuser:proxypass@proxy.local:3128 refused\n",
  );
  const r = await svc.nodeGetVolumeStats({ volumeId: "vol-pv-1", volumePath: t });
  const message = r.volumeCondition?.message ?? "";
  assert.equal(r.volumeCondition?.abnormal, true);
  assert.match(message, /reported: mount-s3 exited/);
  assert.doesNotMatch(message, /AKIATEST/, "the volume's access key id");
  assert.doesNotMatch(message, /AKIAIOSFODNN7EXAMPLE/, "an AWS-shaped key id");
  assert.doesNotMatch(message, /proxyuser|proxypass/, "the proxy's user and password");
  assert.match(
    message,
    /access key <redacted> \(also <redacted>\) through proxy http:\/\/\[REDACTED\]@proxy\.local:3128/,
  );
});
