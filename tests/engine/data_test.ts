/**
 * Data through our mount-s3 on real S3 servers: files written through the mount read back
 * byte-identical with the SDK, SDK uploads read through the mount, and another client's upload
 * listed within the metadata TTL. Run on versitygw and on Ceph RGW.
 *
 * Known unsupported on Ceph RGW 16.2 (Debian 12), measured: every write through the mount fails.
 * Mountpoint uploads every file with a multipart upload (even 0 and 1 B), and
 * - with upload checksums (the default, crc32c) RGW 16 answers UploadPart with 400
 *   XAmzContentSHA256Mismatch (it does not know the streaming trailing-checksum payload): fsync and
 *   close give EIO and the object does not land;
 * - with `--upload-checksums=off` RGW answers CompleteMultipartUpload without an ETag, which the
 *   client rejects ("Header ETag not found"): EIO although the object lands (a 0 B file fails
 *   before, "missing part checksum").
 * On RGW 16 the write variants therefore check that each size fails exactly so (EIO, nothing
 * landed), and the test "RGW 16 write failures still hold" checks both failure modes: when a
 * newer RGW takes the writes, these tests fail and the variants go back to the byte-identical
 * check. Ceph 18 (Debian 13) takes them: there the write variants are the byte-identical ones and
 * the RGW 16 check is not registered (measured in the Debian 13 fresh check).
 *
 * @module
 */
import assert from "node:assert/strict";
import { HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import {
  assertReadThrough,
  engineTest,
  errno,
  fuseReason,
  mountEngine,
  objectSha256,
  putSdkObjects,
  rgwReason,
  rgwServer,
  type Server,
  sha256,
  startVersitygw,
  testBytes,
  versitygwReason,
  withBucket,
  writeSequential,
} from "../testbed/harness/engine.ts";

const MIB = 1024 * 1024;
/** Sizes written through the mount. */
const SIZES = [
  { label: "0 B", size: 0 },
  { label: "1 B", size: 1 },
  { label: "5 MiB+1", size: 5 * MIB + 1 },
  { label: "300 MiB", size: 300 * MIB },
];

/** Whether RGW is Ceph 16 (Debian 12), whose multipart answers break Mountpoint's writes. */
function rgwIs16(): boolean {
  try {
    const out = new Deno.Command("radosgw", {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    })
      .outputSync();
    return /ceph version 16\./.test(new TextDecoder().decode(out.stdout));
  } catch {
    return false;
  }
}

type Kind = "versitygw" | "rgw";
const RGW_REASON = fuseReason() ?? rgwReason();
const RGW_IS_16 = rgwIs16();
const SERVERS: { kind: Kind; reason: string | undefined; start: () => Promise<Server> }[] = [
  { kind: "versitygw", reason: fuseReason() ?? versitygwReason(), start: () => startVersitygw() },
  { kind: "rgw", reason: RGW_REASON, start: () => Promise.resolve(rgwServer()) },
];

for (const { kind, reason, start } of SERVERS) {
  for (const { label, size } of SIZES) {
    if (kind === "rgw" && RGW_IS_16) {
      engineTest(
        `engine/rgw: a ${label} file written through the mount fails with EIO on Ceph RGW 16.2 and does not land (known unsupported: see the module doc)`,
        reason,
        () =>
          withBucket(start, async (server, s3, bucket) => {
            const bytes = testBytes(size, size + 7);
            {
              await using m = await mountEngine({ bucket, server });
              const err = await writeSequential(`${m.dir}/file.bin`, bytes).then(
                () => undefined,
                (e) => e,
              );
              assert.equal(errno(err), "EIO", `${err}`);
              assert.equal(await m.unmount(), 0);
            }
            await assert.rejects(
              s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "file.bin" })),
            );
          }),
      );
      continue;
    }
    engineTest(
      `engine/${kind}: a ${label} file written through the mount reads back byte-identical with the SDK`,
      reason,
      () =>
        withBucket(start, async (server, s3, bucket) => {
          const bytes = testBytes(size, size + 7);
          {
            await using m = await mountEngine({ bucket, server });
            await writeSequential(`${m.dir}/file.bin`, bytes);
            assert.equal((await Deno.stat(`${m.dir}/file.bin`)).size, size);
            assert.equal(await m.unmount(), 0);
          }
          const head = await s3.send(
            new HeadObjectCommand({ Bucket: bucket, Key: "file.bin" }),
          );
          assert.equal(head.ContentLength, size);
          assert.equal(await objectSha256(s3, bucket, "file.bin"), sha256(bytes));
        }),
    );
  }

  engineTest(
    `engine/${kind}: objects uploaded with the SDK read through the mount byte-identical`,
    reason,
    () =>
      withBucket(start, async (server, s3, bucket) => {
        const objects = await putSdkObjects(s3, bucket);
        await using m = await mountEngine({ bucket, server, args: ["--read-only"] });
        await assertReadThrough(m.dir, objects);
        assert.equal(await m.unmount(), 0);
      }),
  );

  engineTest(
    `engine/${kind}: an object uploaded by another client is listed within the metadata TTL`,
    reason,
    () =>
      withBucket(start, async (server, s3, bucket) => {
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "before.txt", Body: "a" }));
        const ttlSeconds = 2;
        await using m = await mountEngine({
          bucket,
          server,
          args: [`--metadata-ttl=${ttlSeconds}`],
        });
        const list = async () => {
          const names: string[] = [];
          for await (const e of Deno.readDir(m.dir)) names.push(e.name);
          return names.sort();
        };
        assert.deepEqual(await list(), ["before.txt"]);
        // A cached negative lookup, which the TTL must also expire.
        await assert.rejects(Deno.stat(`${m.dir}/after.txt`), Deno.errors.NotFound);
        const uploaded = Date.now();
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "after.txt", Body: "bb" }));
        let listedAfter = -1;
        let statAfter = -1;
        const deadline = uploaded + ttlSeconds * 1000 + 5_000; // TTL + slack for a busy machine
        while (Date.now() < deadline && (listedAfter < 0 || statAfter < 0)) {
          if (listedAfter < 0 && (await list()).includes("after.txt")) {
            listedAfter = Date.now() - uploaded;
          }
          if (statAfter < 0 && (await Deno.stat(`${m.dir}/after.txt`).catch(() => undefined))) {
            statAfter = Date.now() - uploaded;
          }
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(listedAfter >= 0, `after.txt not listed within ${ttlSeconds} s + 5 s`);
        assert.ok(statAfter >= 0, `after.txt not found by stat within ${ttlSeconds} s + 5 s`);
        assert.equal(await Deno.readTextFile(`${m.dir}/after.txt`), "bb");
        assert.equal(await m.unmount(), 0);
      }),
  );
}

// Only where RGW is Ceph 16 (Debian 12), or cannot run (then reported as skipped). A newer RGW
// (Ceph 18 on Debian 13) takes the writes: there the byte-identical write variants above run in
// its place, so nothing is left out.
if (RGW_REASON !== undefined || RGW_IS_16) {
  engineTest(
    "engine/rgw: RGW 16 write failures still hold (why the RGW write variants are known unsupported)",
    RGW_REASON,
    rgw16WriteFailures,
  );
}

function rgw16WriteFailures(): Promise<void> {
  return withBucket(() => Promise.resolve(rgwServer()), async (server, s3, bucket) => {
    const bytes = testBytes(1, 11);
    {
      await using m = await mountEngine({ bucket, server });
      const err = await writeSequential(`${m.dir}/default.bin`, bytes).then(
        () => undefined,
        (e) => e,
      );
      assert.equal(errno(err), "EIO", `with upload checksums: ${err}`);
      assert.equal(await m.unmount(), 0);
      assert.match(m.proc.stdout(), /XAmzContentSHA256Mismatch/);
    }
    await assert.rejects(
      s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "default.bin" })),
    );
    {
      await using m = await mountEngine({
        bucket,
        server,
        args: ["--upload-checksums=off"],
      });
      const err = await writeSequential(`${m.dir}/off.bin`, bytes).then(
        () => undefined,
        (e) => e,
      );
      assert.equal(errno(err), "EIO", `without upload checksums: ${err}`);
      assert.equal(await m.unmount(), 0);
      assert.match(m.proc.stdout(), /Header "ETag" not found/);
    }
    // ... although the object landed.
    assert.equal(await objectSha256(s3, bucket, "off.bin"), sha256(bytes));
  });
}
