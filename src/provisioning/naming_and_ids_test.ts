import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { bucketNameFor, bucketNamePrefixProblem, bucketNameProblem } from "./bucket_naming.ts";
import { parseParameters } from "./parameters.ts";
import { formatVolumeId, parseVolumeId, type VolumeRef } from "./volume_id.ts";
import { requestedCapacity } from "./capabilities.ts";

Deno.test("bucket names: pvc names stay readable, others are made valid and unique", () => {
  const uid = "pvc-0f3c5a2e-1b2c-4d5e-8f90-123456789abc";
  assert.deepEqual(bucketNameFor(uid), uid);
  assert.deepEqual(bucketNameFor(uid, "team-a-"), `team-a-${uid}`);
  assert.deepEqual(bucketNameFor(uid, "team-a-"), bucketNameFor(uid, "team-a-"), "deterministic");
  const long = bucketNameFor(uid, "a-very-long-prefix-for-buckets-");
  assert.deepEqual(bucketNameProblem(long), undefined);
  assert.ok(long.length <= 63);
  for (const name of ["My_Volume", "..x..", "192.168.1.1", "xn--abc", "a", "UPPER/case:x"]) {
    const b = bucketNameFor(name);
    assert.deepEqual(bucketNameProblem(b), undefined, `${name} → ${b}`);
  }
  assert.ok(
    bucketNameFor("My_Volume") !== bucketNameFor("my-volume"),
    "distinct names stay distinct",
  );
  assert.ok(bucketNameProblem("192.168.1.1"));
  assert.ok(bucketNameProblem("ab"));
  assert.ok(bucketNameProblem("bucket-s3alias"));
  assert.ok(bucketNamePrefixProblem("Bad_Prefix"));
  assert.ok(bucketNamePrefixProblem("-x"));
  assert.deepEqual(bucketNamePrefixProblem("team-a-"), undefined);
});

Deno.test("volume IDs round-trip and stay under 128 bytes", () => {
  const refs: VolumeRef[] = [
    {
      mode: "bucket",
      deletePolicy: "delete-if-empty",
      credentials: "driver",
      region: "",
      bucket: "pvc-1",
      prefix: "",
    },
    {
      mode: "prefix",
      deletePolicy: "delete-all",
      credentials: "secret",
      region: "eu-west-1",
      bucket: "shared",
      prefix: "team/pvc-1/",
    },
  ];
  for (const ref of refs) assert.deepEqual(parseVolumeId(formatVolumeId(ref)), ref);
  assert.deepEqual(formatVolumeId(refs[0]!), "s3:1:b:e:d::pvc-1");
  for (const bad of ["", "my-bucket", "s3:2:b:e:d::x", "s3:1:x:e:d::x", "s3:1:b:e:d::x:extra"]) {
    assert.deepEqual(parseVolumeId(bad), undefined, bad);
  }
});

Deno.test("parameters: defaults, modes and refusals", () => {
  const d = parseParameters({});
  assert.deepEqual([d.mode, d.deletePolicy, d.bucketNamePrefix], ["bucket", "delete-if-empty", ""]);
  const p = parseParameters({ mode: "prefix", bucketName: "shared", basePrefix: "team/" });
  assert.deepEqual([p.mode, p.bucketName, p.basePrefix], ["prefix", "shared", "team/"]);
  const extra = parseParameters({
    "csi.storage.k8s.io/pvc/name": "data",
    "csi.storage.k8s.io/pvc/namespace": "ns",
    "csi.storage.k8s.io/pv/name": "pvc-1",
    csiProvisionerSecretName: "x",
  });
  assert.deepEqual([extra.pvcName, extra.pvcNamespace], ["data", "ns"]);
  // The local cache attributes pass through to the volume context, checked.
  const cached = parseParameters({ cache: "emptyDir", cacheEmptyDirSizeLimit: "2Gi" });
  assert.deepEqual(cached.passthrough, { cache: "emptyDir", cacheEmptyDirSizeLimit: "2Gi" });
  const bad: [Record<string, string>, RegExp][] = [
    [{ deletepolicy: "retain" }, /Unknown StorageClass parameter.*"deletepolicy"/],
    [{ mode: "object" }, /mode: "object" is not one of bucket, prefix/],
    [{ deletePolicy: "purge" }, /deletePolicy: "purge"/],
    [{ mode: "prefix" }, /bucketName is required with mode "prefix"/],
    [{ mode: "prefix", bucketName: "Bad_Bucket" }, /bucketName "Bad_Bucket"/],
    [{ mode: "prefix", bucketName: "ok-b", basePrefix: "/abs/" }, /basePrefix "\/abs\/"/],
    [{ mode: "prefix", bucketName: "ok-b", basePrefix: "a/../" }, /basePrefix/],
    [{ bucketName: "x-y-z" }, /bucketName applies to mode "prefix" only/],
    [{ bucketNamePrefix: "UPPER" }, /bucketNamePrefix "UPPER"/],
    [{ region: "Not A Region" }, /region "Not A Region"/],
    [{ authenticationSource: "pod" }, /authenticationSource: "pod"/],
    [{ engine: "goofys" }, /engine: "goofys"/],
    [{ cache: "tmpfs" }, /parameter cache="tmpfs" is not a cache type/],
    [{ cacheEmptyDirSizeLimit: "1Gi" }, /cacheEmptyDirSizeLimit is set but cache is not/],
    [{ cache: "ephemeral" }, /needs both cacheEphemeralStorageClassName/],
  ];
  for (const [params, re] of bad) {
    let err: CsiError | undefined;
    try {
      parseParameters(params);
    } catch (e) {
      err = e as CsiError;
    }
    assert.ok(err instanceof CsiError, JSON.stringify(params));
    assert.deepEqual(err.code, 3, JSON.stringify(params));
    assert.ok(re.test(err.message), `${JSON.stringify(params)}: ${err.message}`);
  }
});

Deno.test("capacity is echoed; an inverted range is refused", () => {
  assert.deepEqual(requestedCapacity(undefined), 0);
  assert.deepEqual(requestedCapacity({ requiredBytes: 1024 }), 1024);
  assert.deepEqual(requestedCapacity({ limitBytes: 2048 }), 2048);
  assert.throws(() => requestedCapacity({ requiredBytes: 10, limitBytes: 5 }), /larger/);
});
