import assert from "node:assert/strict";
import { Code, CsiError } from "../csi/errors.ts";
import type { CreateVolumeRequest, VolumeCapability } from "../csi/gen/csi_types.ts";
import { FakeS3 } from "../s3/fake_bucket_store.ts";
import { ControllerService } from "./controller_service.ts";
import { META, TAG } from "./ownership.ts";

const RWX: VolumeCapability = {
  mount: { fsType: "", mountFlags: [] },
  accessType: "mount",
  accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
};
const DRIVER = { accessKeyId: "DRIVERKEY", secretAccessKey: "driversecret" };
const TENANT = { "access_key_id": "TENANTKEY", "secret_access_key": "tenantsecret" };
const NAME = "pvc-0f3c5a2e-1b2c-4d5e-8f90-123456789abc";

function setup(withDriver = true) {
  const driver = withDriver ? DRIVER : undefined;
  const s3 = new FakeS3().addAccount("DRIVERKEY", "driversecret")
    .addAccount("TENANTKEY", "tenantsecret").addAccount("OTHERKEY", "othersecret");
  const svc = new ControllerService({
    stores: s3.factory(),
    defaultRegion: "us-east-1",
    driverCredentials: driver,
    endpoint: "http://s3.test",
  });
  return { s3, svc };
}

function req(over: Partial<CreateVolumeRequest> = {}): CreateVolumeRequest {
  return {
    name: NAME,
    capacityRange: { requiredBytes: 1 << 30 },
    volumeCapabilities: [RWX],
    parameters: {},
    secrets: {},
    ...over,
  };
}

async function code(p: Promise<unknown>): Promise<[Code, string]> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CsiError, String(err));
    return [err.code, err.message];
  }
  throw new Error("expected a CsiError");
}

Deno.test("capabilities: CREATE_DELETE_VOLUME only", async () => {
  const { svc } = setup();
  const caps = await svc.controllerGetCapabilities();
  assert.deepEqual(caps.capabilities?.map((c) => c.rpc?.type), ["CREATE_DELETE_VOLUME"]);
});

Deno.test("CreateVolume makes one tagged bucket; a retry returns the same volume", async () => {
  const { s3, svc } = setup();
  const a = await svc.createVolume(req());
  const b = await svc.createVolume(req());
  assert.deepEqual(a, b);
  assert.equal(s3.buckets.size, 1);
  const bucket = s3.buckets.get(NAME)!;
  assert.equal(bucket.owner, "DRIVERKEY");
  assert.equal(bucket.tags[TAG.volumeName], NAME);
  assert.equal(bucket.tags[TAG.volumeId], a.volume?.volumeId);
  assert.equal(a.volume?.capacityBytes, 1 << 30);
  assert.deepEqual(a.volume?.volumeContext, {
    bucketName: NAME,
    authenticationSource: "driver",
  });
  // Concurrent retries still make one bucket.
  await Promise.all([1, 2, 3].map(() => svc.createVolume(req({ name: "pvc-concurrent" }))));
  assert.equal(s3.buckets.size, 2);
});

Deno.test("CreateVolume: same name, other capacity or parameters → ALREADY_EXISTS", async () => {
  const { svc } = setup();
  await svc.createVolume(req());
  const [c1, m1] = await code(svc.createVolume(req({ capacityRange: { requiredBytes: 5 } })));
  assert.equal(c1, Code.ALREADY_EXISTS);
  assert.match(m1, /recorded capacity 1073741824 bytes, requested 5/);
  const [c2, m2] = await code(
    svc.createVolume(req({ parameters: { deletePolicy: "delete-all" } })),
  );
  assert.equal(c2, Code.ALREADY_EXISTS);
  assert.match(m2, /different parameters/);
});

Deno.test("CreateVolume never takes over a bucket it did not create", async () => {
  const { s3, svc } = setup();
  s3.addBucket("pvc-foreign", "OTHERKEY");
  const [c1, m1] = await code(svc.createVolume(req({ name: "pvc-foreign" })));
  assert.equal(c1, Code.ALREADY_EXISTS);
  assert.match(m1, /belongs to another S3 account.*bucketNamePrefix/);
  s3.addBucket("pvc-mine-with-data", "DRIVERKEY").objects.set("x", {});
  const [c2] = await code(svc.createVolume(req({ name: "pvc-mine-with-data" })));
  assert.equal(c2, Code.ALREADY_EXISTS);
  s3.addBucket("pvc-tagged", "DRIVERKEY", { team: "a" });
  assert.equal((await code(svc.createVolume(req({ name: "pvc-tagged" }))))[0], Code.ALREADY_EXISTS);
  // An empty untagged bucket (interrupted CreateVolume) is adopted.
  s3.addBucket("pvc-interrupted", "DRIVERKEY");
  await svc.createVolume(req({ name: "pvc-interrupted" }));
  assert.equal(s3.buckets.get("pvc-interrupted")!.tags[TAG.volumeName], "pvc-interrupted");
});

Deno.test("the cache parameters reach the volume context (the node and the controller read them)", async () => {
  const { svc } = setup();
  const v = await svc.createVolume(req({
    parameters: { cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi", cacheEmptyDirMedium: "Memory" },
  }));
  assert.equal(v.volume?.volumeContext?.cache, "emptyDir");
  assert.equal(v.volume?.volumeContext?.cacheEmptyDirSizeLimit, "1Gi");
  assert.equal(v.volume?.volumeContext?.cacheEmptyDirMedium, "Memory");
});

Deno.test("prefix mode: no new bucket, a marker at the prefix, scoped volume context", async () => {
  const { s3, svc } = setup();
  s3.addBucket("shared", "DRIVERKEY");
  const params = { mode: "prefix", bucketName: "shared", basePrefix: "team-a/" };
  const v = await svc.createVolume(req({ parameters: params }));
  await svc.createVolume(req({ parameters: params }));
  assert.equal(s3.buckets.size, 1);
  assert.deepEqual(v.volume?.volumeContext, {
    bucketName: "shared",
    prefix: `team-a/${NAME}/`,
    authenticationSource: "driver",
  });
  const marker = s3.buckets.get("shared")!.objects.get(`team-a/${NAME}/`);
  assert.equal(marker?.[META.volumeId], v.volume?.volumeId);
  // Foreign data under the prefix → refused.
  s3.buckets.get("shared")!.objects.set("team-a/pvc-taken/file", {});
  const [c] = await code(svc.createVolume(req({ name: "pvc-taken", parameters: params })));
  assert.equal(c, Code.ALREADY_EXISTS);
  const [c2, m2] = await code(
    svc.createVolume(req({ parameters: { mode: "prefix", bucketName: "missing-bucket" } })),
  );
  assert.equal(c2, Code.FAILED_PRECONDITION);
  assert.match(m2, /does not exist: create it first/);
});

Deno.test("DeleteVolume per policy, idempotent, never on foreign buckets", async () => {
  const { s3, svc } = setup();
  const mk = async (name: string, deletePolicy: string) =>
    (await svc.createVolume(req({ name, parameters: { deletePolicy } }))).volume!.volumeId!;
  const retain = await mk("pvc-retain", "retain");
  const ifEmpty = await mk("pvc-if-empty", "delete-if-empty");
  const all = await mk("pvc-all", "delete-all");
  for (const b of ["pvc-retain", "pvc-if-empty", "pvc-all"]) {
    s3.buckets.get(b)!.objects.set("data.txt", {});
  }
  s3.buckets.get("pvc-all")!.oldVersions.push("old.txt");

  await svc.deleteVolume({ volumeId: retain });
  assert.ok(s3.buckets.has("pvc-retain"));

  const [c, m] = await code(svc.deleteVolume({ volumeId: ifEmpty }));
  assert.equal(c, Code.FAILED_PRECONDITION);
  assert.match(m, /not empty \(data\.txt\).*delete-if-empty.*Retain/);
  s3.buckets.get("pvc-if-empty")!.objects.clear();
  await svc.deleteVolume({ volumeId: ifEmpty });
  assert.ok(!s3.buckets.has("pvc-if-empty"));
  await svc.deleteVolume({ volumeId: ifEmpty });

  await svc.deleteVolume({ volumeId: all });
  assert.ok(!s3.buckets.has("pvc-all"));
  await svc.deleteVolume({ volumeId: all });

  // A bucket re-created by someone else under the name is left alone; so are static handles.
  s3.addBucket("pvc-all", "DRIVERKEY", { owner: "someone" }).objects.set("keep", {});
  await svc.deleteVolume({ volumeId: all });
  assert.ok(s3.buckets.get("pvc-all")!.objects.has("keep"));
  await svc.deleteVolume({ volumeId: "my-static-bucket" });
  await svc.deleteVolume({ volumeId: "s3:1:b:a:d::pvc-all" });
  assert.ok(s3.buckets.get("pvc-all")!.objects.has("keep"));
});

Deno.test("DeleteVolume in prefix mode deletes only the volume's keys", async () => {
  const { s3, svc } = setup();
  const shared = s3.addBucket("shared", "DRIVERKEY");
  const p = (deletePolicy: string) => ({ mode: "prefix", bucketName: "shared", deletePolicy });
  const a = (await svc.createVolume(req({ name: "pvc-a", parameters: p("delete-all") }))).volume!;
  const e = (await svc.createVolume(req({ name: "pvc-e", parameters: p("delete-if-empty") })))
    .volume!;
  shared.objects.set("pvc-a/f1", {}).set("pvc-a0/other", {}).set("pvc-e/f", {});
  await svc.deleteVolume({ volumeId: a.volumeId! });
  assert.deepEqual([...shared.objects.keys()].sort(), ["pvc-a0/other", "pvc-e/", "pvc-e/f"]);
  assert.equal((await code(svc.deleteVolume({ volumeId: e.volumeId! })))[0], 9);
  shared.objects.delete("pvc-e/f");
  await svc.deleteVolume({ volumeId: e.volumeId! });
  assert.deepEqual([...shared.objects.keys()], ["pvc-a0/other"]);
  assert.ok(s3.buckets.has("shared"));
});

Deno.test("credentials: secrets when given, driver otherwise, never a fallback", async () => {
  const { s3, svc } = setup();
  const v = (await svc.createVolume(req({ name: "pvc-tenant", secrets: TENANT }))).volume!;
  assert.equal(s3.buckets.get("pvc-tenant")!.owner, "TENANTKEY");
  assert.equal(v.volumeContext?.authenticationSource, "secret");
  const [c, m] = await code(svc.deleteVolume({ volumeId: v.volumeId! }));
  assert.equal(c, Code.FAILED_PRECONDITION);
  assert.match(m, /does not fall back/);
  await svc.deleteVolume({ volumeId: v.volumeId!, secrets: TENANT });
  assert.ok(!s3.buckets.has("pvc-tenant"));

  // Retain needs no credentials: nothing is touched.
  const kept = (await svc.createVolume(
    req({ name: "pvc-kept", secrets: TENANT, parameters: { deletePolicy: "retain" } }),
  )).volume!;
  await svc.deleteVolume({ volumeId: kept.volumeId! });
  assert.ok(s3.buckets.has("pvc-kept"));

  const none = setup(false).svc;
  const [c2, m2] = await code(none.createVolume(req()));
  assert.equal(c2, Code.FAILED_PRECONDITION);
  assert.match(m2, /provisioner-secret-name/);
});

Deno.test("bad requests get the right code and a message that says what to fix", async () => {
  const { s3, svc } = setup();
  const cases: [string, Promise<unknown>, Code, RegExp][] = [
    ["missing name", svc.createVolume(req({ name: "" })), 3, /Volume name not provided/],
    ["no capabilities", svc.createVolume(req({ volumeCapabilities: [] })), 3, /capabilities/],
    [
      "block",
      svc.createVolume(req({ volumeCapabilities: [{ block: {}, accessType: "block" }] })),
      3,
      /Block volumes/,
    ],
    [
      "access mode",
      svc.createVolume(
        req({ volumeCapabilities: [{ ...RWX, accessMode: { mode: "MULTI_NODE_SINGLE_WRITER" } }] }),
      ),
      3,
      /Access mode MULTI_NODE_SINGLE_WRITER/,
    ],
    [
      "fsType",
      svc.createVolume(req({ volumeCapabilities: [{ ...RWX, mount: { fsType: "ext4" } }] })),
      3,
      /fstype/,
    ],
    ["unknown param", svc.createVolume(req({ parameters: { foo: "1" } })), 3, /"foo"/],
    [
      "bad prefix",
      svc.createVolume(req({ parameters: { bucketNamePrefix: "Bad!" } })),
      3,
      /bucketNamePrefix/,
    ],
    [
      "secret w/o secret key",
      svc.createVolume(req({ secrets: { "access_key_id": "TENANTKEY" } })),
      3,
      /secret_access_key is missing.*has keys: access_key_id/,
    ],
    [
      "wrong secret",
      svc.createVolume(req({ secrets: { "access_key_id": "NOPE", "secret_access_key": "x" } })),
      7,
      /^(?!.*NOPE).*rejected the keys of the provisioner secret/,
    ],
    [
      "snapshot source",
      svc.createVolume(req({ volumeContentSource: { snapshot: { snapshotId: "s" } } })),
      3,
      /content sources/,
    ],
    ["delete without id", svc.deleteVolume({ volumeId: "" }), 3, /Volume ID not provided/],
  ];
  for (const [what, p, want, re] of cases) {
    const [c, m] = await code(p);
    assert.equal(c, want, `${what}: ${m}`);
    assert.match(m, re, what);
  }
  s3.readOnly.add("DRIVERKEY");
  const [c, m] = await code(svc.createVolume(req({ name: "pvc-ro" })));
  assert.equal(c, Code.PERMISSION_DENIED);
  // The answer reaches the PVC's Event: it says whose keys, never the access key id.
  assert.match(
    m,
    /^(?!.*DRIVERKEY).*denied the driver's credentials permission to (create|provision)/,
  );
  s3.down = true;
  const [c2, m2] = await code(svc.createVolume(req({ name: "pvc-down" })));
  assert.equal(c2, Code.UNAVAILABLE);
  assert.match(m2, /http:\/\/s3\.test is unreachable/);
  assert.equal(s3.buckets.size, 0);
});

Deno.test("ValidateVolumeCapabilities confirms what S3 serves", async () => {
  const { svc } = setup();
  const v = (await svc.createVolume(req())).volume!;
  const ok = await svc.validateVolumeCapabilities({
    volumeId: v.volumeId!,
    volumeCapabilities: [RWX],
  });
  assert.ok(ok.confirmed);
  const no = await svc.validateVolumeCapabilities({
    volumeId: v.volumeId!,
    volumeCapabilities: [{ block: {}, accessType: "block" }],
  });
  assert.equal(no.confirmed, undefined);
  assert.match(no.message!, /Block/);
  const [c] = await code(
    svc.validateVolumeCapabilities({ volumeId: "s3:1:b:e:d::gone", volumeCapabilities: [RWX] }),
  );
  assert.equal(c, Code.NOT_FOUND);
});
