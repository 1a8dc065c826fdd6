/**
 * The data side of DeleteVolume, per delete policy (`retain` never reaches here):
 *
 * - `delete-if-empty`: delete the bucket (mode `bucket`) or the prefix marker (mode `prefix`) when
 *   nothing else is there; otherwise FailedPrecondition naming a few keys, so the PV's events say
 *   why it stays `Released` (csi-provisioner retries with backoff: emptying the bucket is enough);
 * - `delete-all`: delete every object version, delete marker and unfinished upload, then the bucket
 *   (mode `bucket`) — in mode `prefix` only the keys under the prefix.
 *
 * A bucket or prefix is touched only when its ownership record carries exactly this volume ID;
 * otherwise (gone, or re-created by someone else) the volume no longer exists and the call succeeds
 * without deleting anything.
 *
 * @module
 */
import { failedPrecondition } from "../csi/errors.ts";
import { type BucketStore, S3StoreError } from "../s3/bucket_store.ts";
import { logger } from "../util/log.ts";
import { META, TAG } from "./ownership.ts";
import type { VolumeRef } from "./volume_id.ts";

const log = logger("controller", "provisioning");

function notEmpty(where: string, keys: string[], truncated: boolean, volumeId: string) {
  return failedPrecondition(
    `Volume "${volumeId}" is not deleted: ${where} is not empty (${keys.join(", ")}${
      truncated ? ", …" : ""
    }) and its deletePolicy is delete-if-empty. Empty it and the deletion is retried automatically, or set the PV's persistentVolumeReclaimPolicy to Retain to keep the data`,
  );
}

/** Delete the data of volume `ref` as its policy says. */
export async function deleteVolumeData(
  store: BucketStore,
  volumeId: string,
  ref: VolumeRef,
  signal: AbortSignal,
): Promise<void> {
  const { bucket, prefix } = ref;
  const state = await store.head(bucket, signal);
  if (state === "missing") {
    log.info("DeleteVolume {volumeId}: bucket {bucket} is already gone", { volumeId, bucket });
    return;
  }
  if (state === "forbidden") {
    throw new S3StoreError(
      "access-denied",
      `bucket "${bucket}" exists but these credentials may not access it`,
      403,
    );
  }
  if (ref.mode === "bucket") {
    const tags = await store.getTags(bucket, signal);
    if (tags[TAG.volumeId] !== volumeId) {
      log.warn(
        "DeleteVolume {volumeId}: bucket {bucket} is not this volume's (tagged {tag}); left untouched",
        { volumeId, bucket, tag: tags[TAG.volumeId] ?? "none" },
      );
      return;
    }
    if (ref.deletePolicy === "delete-if-empty") {
      const content = await store.listSome(bucket, "", 3, undefined, signal);
      if (content.keys.length > 0) {
        throw notEmpty(`bucket "${bucket}"`, content.keys, content.truncated, volumeId);
      }
    } else {
      const n = await store.deleteAll(bucket, "", signal);
      log.info("DeleteVolume {volumeId}: deleted {count} object versions of {bucket}", {
        volumeId,
        count: n,
        bucket,
      });
    }
    try {
      await store.deleteBucket(bucket, signal);
    } catch (err) {
      if (err instanceof S3StoreError && err.kind === "not-empty") {
        const content = await store.listSome(bucket, "", 3, undefined, signal);
        throw notEmpty(`bucket "${bucket}"`, content.keys, content.truncated, volumeId);
      }
      throw err;
    }
    log.info("DeleteVolume {volumeId}: bucket {bucket} deleted", { volumeId, bucket });
    return;
  }
  const meta = await store.headObject(bucket, prefix, signal);
  if (meta?.[META.volumeId] !== volumeId) {
    log.info(
      "DeleteVolume {volumeId}: prefix {prefix} of {bucket} has no marker of this volume; nothing deleted",
      { volumeId, prefix, bucket },
    );
    return;
  }
  if (ref.deletePolicy === "delete-if-empty") {
    const content = await store.listSome(bucket, prefix, 3, prefix, signal);
    if (content.keys.length > 0) {
      throw notEmpty(`prefix "${bucket}/${prefix}"`, content.keys, content.truncated, volumeId);
    }
    // Only the marker: an object written since the check above is never deleted by this policy.
    await store.deleteObject(bucket, prefix, signal);
  } else {
    const n = await store.deleteAll(bucket, prefix, signal);
    log.info("DeleteVolume {volumeId}: deleted {count} object versions under {where}", {
      volumeId,
      count: n,
      where: `${bucket}/${prefix}`,
    });
  }
  log.info("DeleteVolume {volumeId}: prefix {prefix} of {bucket} deleted", {
    volumeId,
    prefix,
    bucket,
  });
}
