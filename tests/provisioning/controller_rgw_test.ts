/**
 * The Controller service against Ceph RGW, through the gRPC socket, as csi-provisioner calls it:
 * the must-show list for CreateVolume/DeleteVolume and the bad-request table.
 */
import assert from "node:assert/strict";
import type { CreateVolumeRequest, VolumeCapability } from "../../src/csi/gen/csi_types.ts";
import { validatePublish } from "../../src/node/publish_request.ts";
import { TAG } from "../../src/provisioning/ownership.ts";
import { grpcError, RawS3, rgw, rgwTest, startController, unique } from "./_rgw.ts";

const S3 = rgw();

const RWX: VolumeCapability = {
  mount: { fsType: "", mountFlags: [] },
  accessType: "mount",
  accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
};

function req(name: string, over: Partial<CreateVolumeRequest> = {}): CreateVolumeRequest {
  return {
    name,
    capacityRange: { requiredBytes: 5 * 2 ** 30 },
    volumeCapabilities: [RWX],
    parameters: {},
    ...over,
  };
}

rgwTest(
  "CreateVolume makes a tagged bucket; a retry returns the same volume and bucket",
  async () => {
    await using ctl = await startController(S3!);
    const raw = new RawS3(S3!);
    const name = `pvc-${unique()}`;
    try {
      const caps = await ctl.csi.controller.controllerGetCapabilities({});
      assert.deepEqual(caps.capabilities?.map((c) => c.rpc?.type), ["CREATE_DELETE_VOLUME"]);
      const plugin = await ctl.csi.identity.getPluginCapabilities({});
      assert.deepEqual(plugin.capabilities?.map((c) => c.service?.type), ["CONTROLLER_SERVICE"]);

      const first = await ctl.csi.controller.createVolume(req(name));
      assert.ok(await raw.exists(name), "bucket exists");
      const tags = await raw.tags(name);
      assert.equal(tags[TAG.volumeName], name);
      assert.equal(tags[TAG.volumeId], first.volume?.volumeId);
      const again = await Promise.all(
        [1, 2, 3].map(() => ctl.csi.controller.createVolume(req(name))),
      );
      for (const a of again) assert.deepEqual(a, first);
      const buckets = (await (await raw.client()).send(
        new (await import("@aws-sdk/client-s3")).ListBucketsCommand({}),
      )).Buckets!.filter((b) => b.Name!.includes(name));
      assert.equal(buckets.length, 1, "still one bucket");
      assert.equal(Number(first.volume?.capacityBytes), 5 * 2 ** 30);
      assert.deepEqual(first.volume?.volumeContext, {
        bucketName: name,
        authenticationSource: "driver",
      });
      const [code, msg] = await grpcError(
        ctl.csi.controller.createVolume(req(name, { capacityRange: { requiredBytes: 1 } })),
      );
      assert.equal(code, 6, msg);
      assert.match(msg, /different parameters or capacity/);
    } finally {
      await raw.remove(name);
      await raw.close();
    }
  },
);

rgwTest(
  "prefix mode: no new bucket; the volume is its prefix; the node mounts only it",
  async () => {
    await using ctl = await startController(S3!);
    const raw = new RawS3(S3!);
    const shared = `shared-${unique()}`;
    await raw.createBucket(shared);
    try {
      const params = { mode: "prefix", bucketName: shared, basePrefix: "team-a/" };
      const a = await ctl.csi.controller.createVolume(req("pvc-a", { parameters: params }));
      const b = await ctl.csi.controller.createVolume(req("pvc-b", { parameters: params }));
      assert.deepEqual(
        await ctl.csi.controller.createVolume(req("pvc-a", { parameters: params })),
        a,
      );
      assert.equal(a.volume?.volumeContext?.prefix, "team-a/pvc-a/");
      assert.equal(b.volume?.volumeContext?.prefix, "team-a/pvc-b/");
      assert.ok(!(await raw.exists("pvc-a")), "no bucket per volume");
      assert.deepEqual(await raw.keys(shared), ["team-a/pvc-a/", "team-a/pvc-b/"]);
      // What the node plugin makes of the volume context: the engine is scoped to the prefix.
      const publish = validatePublish({
        volumeId: a.volume!.volumeId!,
        targetPath: "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-a/mount",
        volumeCapability: RWX,
        volumeContext: a.volume!.volumeContext!,
      }, "/var/lib/kubelet");
      assert.equal(publish.bucket, shared);
      assert.equal(publish.options.get("prefix"), "team-a/pvc-a/");
    } finally {
      await raw.remove(shared);
      await raw.close();
    }
  },
);

rgwTest("DeleteVolume does what each policy documents, and repeats succeed", async () => {
  await using ctl = await startController(S3!);
  const raw = new RawS3(S3!);
  const id = unique();
  const names = { retain: `r-${id}`, ifEmpty: `e-${id}`, all: `a-${id}` };
  try {
    const mk = async (name: string, deletePolicy: string) =>
      (await ctl.csi.controller.createVolume(req(name, { parameters: { deletePolicy } })))
        .volume!.volumeId!;
    const retain = await mk(names.retain, "retain");
    const ifEmpty = await mk(names.ifEmpty, "delete-if-empty");
    const all = await mk(names.all, "delete-all");
    for (const b of Object.values(names)) await raw.put(b, "dir/data.txt");
    await raw.enableVersioning(names.all);
    await raw.put(names.all, "v.txt", "one");
    await raw.put(names.all, "v.txt", "two");

    await ctl.csi.controller.deleteVolume({ volumeId: retain });
    assert.deepEqual(await raw.keys(names.retain), ["dir/data.txt"], "retain keeps everything");

    const [code, msg] = await grpcError(ctl.csi.controller.deleteVolume({ volumeId: ifEmpty }));
    assert.equal(code, 9, msg);
    assert.match(msg, /is not empty \(dir\/data\.txt\).*delete-if-empty/);
    assert.ok(await raw.exists(names.ifEmpty));
    const c = await raw.client();
    const { DeleteObjectCommand } = await import("@aws-sdk/client-s3");
    await c.send(new DeleteObjectCommand({ Bucket: names.ifEmpty, Key: "dir/data.txt" }));
    await ctl.csi.controller.deleteVolume({ volumeId: ifEmpty });
    assert.ok(!(await raw.exists(names.ifEmpty)), "empty bucket deleted");

    assert.equal((await raw.keys(names.all)).length, 3, "object + two versions");
    await ctl.csi.controller.deleteVolume({ volumeId: all });
    assert.ok(!(await raw.exists(names.all)), "delete-all removed versions and bucket");

    for (const v of [retain, ifEmpty, all]) await ctl.csi.controller.deleteVolume({ volumeId: v });
  } finally {
    for (const b of Object.values(names)) await raw.remove(b);
    await raw.close();
  }
});

rgwTest("prefix mode delete policies touch only the volume's prefix", async () => {
  await using ctl = await startController(S3!);
  const raw = new RawS3(S3!);
  const shared = `shared-${unique()}`;
  await raw.createBucket(shared);
  try {
    const p = (deletePolicy: string) => ({ mode: "prefix", bucketName: shared, deletePolicy });
    const all = await ctl.csi.controller.createVolume(
      req("pvc-1", { parameters: p("delete-all") }),
    );
    const e = await ctl.csi.controller.createVolume(
      req("pvc-2", { parameters: p("delete-if-empty") }),
    );
    await raw.put(shared, "pvc-1/a/b.txt");
    await raw.put(shared, "pvc-10/neighbour.txt");
    await raw.put(shared, "pvc-2/x.txt");
    await ctl.csi.controller.deleteVolume({ volumeId: all.volume!.volumeId! });
    assert.deepEqual(await raw.keys(shared), ["pvc-10/neighbour.txt", "pvc-2/", "pvc-2/x.txt"]);
    const [code] = await grpcError(
      ctl.csi.controller.deleteVolume({ volumeId: e.volume!.volumeId! }),
    );
    assert.equal(code, 9);
    await ctl.csi.controller.deleteVolume({ volumeId: all.volume!.volumeId! });
    assert.ok(await raw.exists(shared), "the shared bucket is never deleted");
  } finally {
    await raw.remove(shared);
    await raw.close();
  }
});

rgwTest("a bucket the driver did not create is never taken over nor deleted", async () => {
  await using ctl = await startController(S3!);
  const raw = new RawS3(S3!);
  const foreign = `pvc-foreign-${unique()}`;
  const mine = `pvc-mine-${unique()}`;
  await raw.createBucket(foreign, "other");
  await raw.createBucket(mine);
  await raw.put(mine, "precious.txt");
  try {
    const [c1, m1] = await grpcError(ctl.csi.controller.createVolume(req(foreign)));
    assert.equal(c1, 6, m1);
    assert.match(m1, /another S3 account/);
    const [c2, m2] = await grpcError(ctl.csi.controller.createVolume(req(mine)));
    assert.equal(c2, 6, m2);
    assert.match(m2, /not created by this driver/);
    // DeleteVolume with handles naming these buckets (e.g. static PVs, forged IDs): untouched.
    for (const volumeId of [mine, `s3:1:b:a:d::${mine}`]) {
      await ctl.csi.controller.deleteVolume({ volumeId });
    }
    // Another account's bucket cannot even be inspected: refused, not reported as deleted.
    const [c3, m3] = await grpcError(
      ctl.csi.controller.deleteVolume({ volumeId: `s3:1:b:a:d::${foreign}` }),
    );
    assert.equal(c3, 7, m3);
    assert.match(m3, /exists but these credentials may not access it/);
    assert.deepEqual(await raw.keys(mine), ["precious.txt"]);
    assert.ok(await raw.exists(foreign, "other"));
  } finally {
    await raw.remove(foreign, "other");
    await raw.remove(mine);
    await raw.close();
  }
});

rgwTest(
  "provisioner secrets: the bucket belongs to the secret's account; delete needs it too",
  async () => {
    await using ctl = await startController(S3!);
    const raw = new RawS3(S3!);
    const name = `pvc-tenant-${unique()}`;
    const secrets = {
      "access_key_id": S3!.other.accessKeyId,
      "secret_access_key": S3!.other.secretAccessKey,
    };
    try {
      const v = await ctl.csi.controller.createVolume(req(name, { secrets }));
      assert.equal(v.volume?.volumeContext?.authenticationSource, "secret");
      assert.ok(await raw.exists(name, "other"));
      const [code, msg] = await grpcError(
        ctl.csi.controller.deleteVolume({ volumeId: v.volume!.volumeId! }),
      );
      assert.equal(code, 9, msg);
      assert.match(msg, /does not fall back/);
      await ctl.csi.controller.deleteVolume({ volumeId: v.volume!.volumeId!, secrets });
      assert.ok(!(await raw.exists(name, "other")));
    } finally {
      await raw.remove(name, "other");
      await raw.close();
    }
  },
);

rgwTest("bad requests: the right code and a message that says what to fix", async () => {
  await using ctl = await startController(S3!);
  await using down = await startController(S3!, { endpoint: "http://127.0.0.1:9" });
  await using noCreds = await startController(S3!, { driverCredentials: false });
  const raw = new RawS3(S3!);
  const c = ctl.csi.controller;
  const n = `pvc-bad-${unique()}`;
  const cases: [string, () => Promise<unknown>, number, RegExp][] = [
    ["missing name", () => c.createVolume(req("")), 3, /Volume name not provided/],
    [
      "bad bucket prefix",
      () => c.createVolume(req(n, { parameters: { bucketNamePrefix: "Team_A" } })),
      3,
      /bucketNamePrefix "Team_A" must start with a lowercase/,
    ],
    [
      "unknown parameter",
      () => c.createVolume(req(n, { parameters: { deletepolicy: "retain" } })),
      3,
      /Unknown StorageClass parameter "deletepolicy"/,
    ],
    [
      "bad delete policy",
      () => c.createVolume(req(n, { parameters: { deletePolicy: "purge" } })),
      3,
      /"purge" is not one of retain, delete-if-empty, delete-all/,
    ],
    [
      "unsupported access mode",
      () =>
        c.createVolume(
          req(n, {
            volumeCapabilities: [{ ...RWX, accessMode: { mode: "MULTI_NODE_SINGLE_WRITER" } }],
          }),
        ),
      3,
      /Access mode MULTI_NODE_SINGLE_WRITER is not supported/,
    ],
    [
      "block volume",
      () => c.createVolume(req(n, { volumeCapabilities: [{ block: {}, accessType: "block" }] })),
      3,
      /Block volumes are not supported/,
    ],
    [
      "prefix mode without bucket",
      () => c.createVolume(req(n, { parameters: { mode: "prefix" } })),
      3,
      /bucketName is required/,
    ],
    [
      "prefix mode, missing bucket",
      () =>
        c.createVolume(req(n, { parameters: { mode: "prefix", bucketName: `nope-${unique()}` } })),
      9,
      /does not exist: create it first/,
    ],
    [
      "secret without secret key",
      () => c.createVolume(req(n, { secrets: { "access_key_id": "AKIA1" } })),
      3,
      /secret_access_key is missing.*it has keys: access_key_id/,
    ],
    [
      "invalid secret (wrong keys)",
      () =>
        c.createVolume(
          req(n, { secrets: { "access_key_id": "WRONGKEY", "secret_access_key": "wrong" } }),
        ),
      7,
      /^(?!.*WRONGKEY).*S3 rejected the keys of the provisioner secret/,
    ],
    [
      "wrong endpoint",
      () => down.csi.controller.createVolume(req(n)),
      14,
      /S3 endpoint http:\/\/127\.0\.0\.1:9 is unreachable.*AWS_ENDPOINT_URL/,
    ],
    [
      "no credentials at all",
      () => noCreds.csi.controller.createVolume(req(n)),
      9,
      /No S3 credentials.*provisioner-secret-name/,
    ],
    [
      "region the server does not serve",
      () => c.createVolume(req(n, { parameters: { region: "eu-west-1" } })),
      3,
      /region is not a location this S3 service knows.*StorageClass parameter region/,
    ],
    [
      "delete without volume id",
      () => c.deleteVolume({ volumeId: "" }),
      3,
      /Volume ID not provided/,
    ],
    [
      "delete secret volume without secret",
      () => c.deleteVolume({ volumeId: `s3:1:b:e:s::${n}` }),
      9,
      /does not fall back/,
    ],
    [
      "unimplemented RPC",
      () => c.controllerPublishVolume({ volumeId: "x", nodeId: "n" }),
      12,
      /ControllerPublishVolume is not implemented/,
    ],
  ];
  try {
    for (const [what, p, want, re] of cases) {
      const [code, msg] = await grpcError(p());
      assert.equal(code, want, `${what}: ${code} ${msg}`);
      assert.match(msg, re, what);
    }
    assert.ok(!(await raw.exists(n)), "no bucket was created by any bad request");
  } finally {
    await raw.remove(n);
    await raw.close();
  }
});
