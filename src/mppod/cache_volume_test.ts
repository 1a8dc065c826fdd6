import assert from "node:assert/strict";
import {
  CacheConfigError,
  cacheKey,
  cacheVolume,
  maxCacheSizeMiB,
  parseCacheConfig,
} from "./cache_volume.ts";

Deno.test("parseCacheConfig(): none, emptyDir, ephemeral and the deprecated mount option", () => {
  assert.equal(parseCacheConfig({}, false), undefined);
  assert.equal(parseCacheConfig({ cache: "" }, false), undefined);
  assert.deepEqual(parseCacheConfig({ cache: "emptyDir" }, false), { type: "emptyDir" });
  assert.deepEqual(
    parseCacheConfig(
      { cache: "emptyDir", cacheEmptyDirSizeLimit: "512Mi", cacheEmptyDirMedium: "Memory" },
      false,
    ),
    { type: "emptyDir", sizeLimit: "512Mi", sizeLimitBytes: 512 * 2 ** 20, medium: "Memory" },
  );
  assert.deepEqual(
    parseCacheConfig({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "nvme-ssd",
      cacheEphemeralStorageResourceRequest: "10G",
    }, false),
    { type: "ephemeral", storageClassName: "nvme-ssd", request: "10G", requestBytes: 10e9 },
  );
  assert.deepEqual(parseCacheConfig({}, true), { type: "emptyDir", fromMountOption: true });
});

Deno.test("parseCacheConfig(): every mistake names the attribute and the fix", () => {
  for (
    const [attrs, option, re] of [
      [{ cache: "true" }, false, /cache="true" is not a cache type: use emptyDir or ephemeral/],
      [{ cache: "emptyDir" }, true, /remove the mount option/],
      [{ cacheEmptyDirMedium: "Memory" }, false, /add cache: emptyDir/],
      [{ cacheEphemeralStorageClassName: "x" }, false, /add cache: ephemeral/],
      [{ cache: "emptyDir", cacheEmptyDirSizeLimit: "-1Gi" }, false, /not a positive size/],
      [{ cache: "emptyDir", cacheEmptyDirSizeLimit: "0" }, false, /not a positive size/],
      [{ cache: "emptyDir", cacheEmptyDirMedium: "memory" }, false, /"memory" is not supported/],
      [
        { cache: "ephemeral", cacheEphemeralStorageResourceRequest: "1Gi" },
        false,
        /needs both cacheEphemeralStorageClassName/,
      ],
      [
        {
          cache: "ephemeral",
          cacheEphemeralStorageClassName: "Bad_Name",
          cacheEphemeralStorageResourceRequest: "1Gi",
        },
        false,
        /"Bad_Name" is not a StorageClass name/,
      ],
      [
        {
          cache: "ephemeral",
          cacheEphemeralStorageClassName: "sc",
          cacheEphemeralStorageResourceRequest: "1Gi",
          cacheEmptyDirSizeLimit: "1Gi",
        },
        false,
        /cacheEmptyDirSizeLimit applies to cache: emptyDir, not ephemeral/,
      ],
    ] as const
  ) {
    assert.throws(
      () => parseCacheConfig(attrs as Record<string, string>, option),
      (e: unknown) => e instanceof CacheConfigError && re.test(e.message),
      JSON.stringify(attrs),
    );
  }
});

Deno.test("cacheKey(): canonical (equal sizes written differently give one key)", () => {
  assert.equal(cacheKey(undefined), "");
  assert.equal(cacheKey(parseCacheConfig({}, true)), "emptyDir");
  const a = parseCacheConfig({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1024Mi" }, false);
  const b = parseCacheConfig({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }, false);
  assert.equal(cacheKey(a), "emptyDir;sizeLimit=1Gi");
  assert.equal(cacheKey(a), cacheKey(b));
  assert.equal(
    cacheKey(parseCacheConfig({ cache: "emptyDir", cacheEmptyDirMedium: "Memory" }, false)),
    "emptyDir;medium=Memory",
  );
  assert.equal(
    cacheKey(parseCacheConfig({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "sc",
      cacheEphemeralStorageResourceRequest: "2Gi",
    }, false)),
    "ephemeral;storageClassName=sc;request=2Gi",
  );
});

Deno.test("cacheVolume(): an emptyDir with limit and medium, or a generic ephemeral volume", () => {
  assert.deepEqual(
    cacheVolume(
      parseCacheConfig({
        cache: "emptyDir",
        cacheEmptyDirSizeLimit: "2Gi",
        cacheEmptyDirMedium: "Memory",
      }, false)!,
    ),
    { name: "cache", emptyDir: { medium: "Memory", sizeLimit: "2Gi" } },
  );
  assert.deepEqual(cacheVolume(parseCacheConfig({}, true)!), { name: "cache", emptyDir: {} });
  assert.deepEqual(
    cacheVolume(
      parseCacheConfig({
        cache: "ephemeral",
        cacheEphemeralStorageClassName: "nvme",
        cacheEphemeralStorageResourceRequest: "4Gi",
      }, false)!,
    ),
    {
      name: "cache",
      ephemeral: {
        volumeClaimTemplate: {
          metadata: { labels: { "s3.csi.scality.com/type": "local-ephemeral-cache" } },
          spec: {
            accessModes: ["ReadWriteOnce"],
            storageClassName: "nvme",
            volumeMode: "Filesystem",
            resources: { requests: { storage: "4Gi" } },
          },
        },
      },
    },
  );
});

Deno.test("maxCacheSizeMiB(): 95 % of an emptyDir limit at most; above the limit refused", () => {
  const limited = parseCacheConfig({ cache: "emptyDir", cacheEmptyDirSizeLimit: "100Mi" }, false)!;
  assert.equal(maxCacheSizeMiB(limited, undefined), 95);
  assert.equal(maxCacheSizeMiB(limited, 50), 50);
  assert.equal(maxCacheSizeMiB(limited, 0), 0);
  assert.equal(maxCacheSizeMiB(limited, 99), 95);
  assert.throws(() => maxCacheSizeMiB(limited, 101), /exceeds cacheEmptyDirSizeLimit="100Mi"/);
  const tiny = parseCacheConfig({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Mi" }, false)!;
  assert.throws(() => maxCacheSizeMiB(tiny, undefined), /too small/);
  assert.equal(
    maxCacheSizeMiB(parseCacheConfig({ cache: "emptyDir" }, false)!, undefined),
    undefined,
  );
  assert.equal(maxCacheSizeMiB(parseCacheConfig({ cache: "emptyDir" }, false)!, 300), 300);
});
