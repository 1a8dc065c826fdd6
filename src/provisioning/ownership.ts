/**
 * Ownership records of provisioned volumes, and the idempotent "make sure it exists" step of
 * CreateVolume:
 *
 * - mode `bucket`: bucket tags `s3.csi.scality.com/volume-name`, `…/volume-id`, `…/fingerprint`,
 *   `…/capacity` (+ `…/pvc-name`, `…/pvc-namespace` with `--extra-create-metadata`);
 * - mode `prefix`: an empty marker object whose key is the prefix itself (`team/pvc-…/`, i.e. the
 *   volume's root directory marker, invisible inside the mount), with the same values as user
 *   metadata (`csi-volume-name`, …).
 *
 * DeleteVolume only ever deletes a bucket/prefix whose record carries its exact volume ID.
 *
 * @module
 */
import { Code, CsiError, failedPrecondition } from "../csi/errors.ts";
import { DRIVER_NAME } from "../util/version.ts";
import type { BucketStore } from "../s3/bucket_store.ts";
import { logger } from "../util/log.ts";

/** Bucket tag keys. */
export const TAG = {
  managedBy: `${DRIVER_NAME}/managed-by`,
  volumeName: `${DRIVER_NAME}/volume-name`,
  volumeId: `${DRIVER_NAME}/volume-id`,
  fingerprint: `${DRIVER_NAME}/fingerprint`,
  capacity: `${DRIVER_NAME}/capacity`,
  pvcName: `${DRIVER_NAME}/pvc-name`,
  pvcNamespace: `${DRIVER_NAME}/pvc-namespace`,
} as const;

/** Marker object metadata keys (S3 user metadata is lower case). */
export const META = {
  volumeName: "csi-volume-name",
  volumeId: "csi-volume-id",
  fingerprint: "csi-fingerprint",
  capacity: "csi-capacity",
  pvcName: "csi-pvc-name",
  pvcNamespace: "csi-pvc-namespace",
} as const;

/** What is recorded for a volume. */
export interface Ownership {
  /** CreateVolume name. */
  readonly name: string;
  /** Volume ID. */
  readonly volumeId: string;
  /** Hash of the request's parameters and capacity. */
  readonly fingerprint: string;
  /** Capacity in bytes. */
  readonly capacity: number;
  /** PVC name (extra metadata). */
  readonly pvcName: string | undefined;
  /** PVC namespace (extra metadata). */
  readonly pvcNamespace: string | undefined;
}

const log = logger("controller", "provisioning");

function sameRequest(
  own: Ownership,
  recorded: {
    volumeId: string | undefined;
    fingerprint: string | undefined;
    capacity: string | undefined;
  },
  where: string,
): void {
  if (recorded.volumeId === own.volumeId && recorded.fingerprint === own.fingerprint) return;
  const capacityNote = recorded.capacity !== undefined && recorded.capacity !== String(own.capacity)
    ? ` (recorded capacity ${recorded.capacity} bytes, requested ${own.capacity})`
    : recorded.volumeId !== own.volumeId
    ? ` (recorded volume ID "${recorded.volumeId}", this request gives "${own.volumeId}")`
    : "";
  throw new CsiError(
    Code.ALREADY_EXISTS,
    `Volume "${own.name}" already exists in ${where} with different parameters or capacity${capacityNote}: a repeated CreateVolume must send the same request; delete the volume first to change it`,
  );
}

function bucketTags(own: Ownership): Record<string, string> {
  const tags: Record<string, string> = {
    [TAG.managedBy]: DRIVER_NAME,
    [TAG.volumeName]: own.name,
    [TAG.volumeId]: own.volumeId,
    [TAG.fingerprint]: own.fingerprint,
    [TAG.capacity]: String(own.capacity),
  };
  if (own.pvcName) tags[TAG.pvcName] = own.pvcName;
  if (own.pvcNamespace) tags[TAG.pvcNamespace] = own.pvcNamespace;
  return tags;
}

/** Make sure bucket `bucket` exists and is recorded as volume `own`. */
export async function ensureBucket(
  store: BucketStore,
  bucket: string,
  own: Ownership,
  signal: AbortSignal,
): Promise<void> {
  const state = await store.head(bucket, signal);
  if (state === "forbidden") {
    throw new CsiError(
      Code.ALREADY_EXISTS,
      `Bucket "${bucket}" for volume "${own.name}" already exists and belongs to another S3 account: choose another bucketNamePrefix in the StorageClass`,
    );
  }
  if (state === "exists") {
    const tags = await store.getTags(bucket, signal);
    const recordedName = tags[TAG.volumeName];
    if (recordedName === own.name) {
      sameRequest(own, {
        volumeId: tags[TAG.volumeId],
        fingerprint: tags[TAG.fingerprint],
        capacity: tags[TAG.capacity],
      }, `bucket "${bucket}"`);
      return;
    }
    if (recordedName !== undefined || Object.keys(tags).length > 0) {
      throw new CsiError(
        Code.ALREADY_EXISTS,
        `Bucket "${bucket}" already exists and is not volume "${own.name}" (${
          recordedName
            ? `it belongs to volume "${recordedName}"`
            : "it was not created by this driver"
        }): choose another bucketNamePrefix in the StorageClass`,
      );
    }
    // Untagged: adopt it only when empty (a CreateVolume interrupted between CreateBucket and
    // PutBucketTagging leaves exactly this); data in it means it is someone else's.
    const content = await store.listSome(bucket, "", 3, undefined, signal);
    if (content.keys.length > 0) {
      throw new CsiError(
        Code.ALREADY_EXISTS,
        `Bucket "${bucket}" already exists with data and was not created by this driver: choose another bucketNamePrefix in the StorageClass`,
      );
    }
    log.warn("Adopting empty untagged bucket {bucket} for volume {name}", {
      bucket,
      name: own.name,
    });
  } else {
    await store.createBucket(bucket, signal);
  }
  try {
    await store.putTags(bucket, bucketTags(own), signal);
  } catch (err) {
    // Do not leave an unrecorded bucket behind: it is empty, we just made it.
    if (state === "missing") await store.deleteBucket(bucket, signal).catch(() => {});
    throw err;
  }
  log.info("Bucket {bucket} created for volume {name}", { bucket, name: own.name });
}

/** Make sure prefix `prefix` of the existing bucket `bucket` is recorded as volume `own`. */
export async function ensurePrefix(
  store: BucketStore,
  bucket: string,
  prefix: string,
  own: Ownership,
  signal: AbortSignal,
): Promise<void> {
  const state = await store.head(bucket, signal);
  if (state === "missing") {
    throw failedPrecondition(
      `Bucket "${bucket}" (StorageClass parameter bucketName) does not exist: create it first; mode "prefix" never creates buckets`,
    );
  }
  if (state === "forbidden") {
    throw new CsiError(
      Code.PERMISSION_DENIED,
      `Bucket "${bucket}" (StorageClass parameter bucketName) exists but these credentials may not access it: use credentials of its owner or grant access`,
    );
  }
  const meta = await store.headObject(bucket, prefix, signal);
  if (meta !== undefined) {
    if (meta[META.volumeName] === own.name) {
      sameRequest(own, {
        volumeId: meta[META.volumeId],
        fingerprint: meta[META.fingerprint],
        capacity: meta[META.capacity],
      }, `"${bucket}/${prefix}"`);
      return;
    }
    throw new CsiError(
      Code.ALREADY_EXISTS,
      `Prefix "${prefix}" of bucket "${bucket}" is already used by ${
        meta[META.volumeName]
          ? `volume "${meta[META.volumeName]}"`
          : "data not created by this driver"
      }: choose another basePrefix`,
    );
  }
  const content = await store.listSome(bucket, prefix, 3, undefined, signal);
  if (content.keys.length > 0) {
    throw new CsiError(
      Code.ALREADY_EXISTS,
      `Prefix "${prefix}" of bucket "${bucket}" already holds objects not created by this driver (${
        content.keys.join(", ")
      }${content.truncated ? ", …" : ""}): choose another basePrefix`,
    );
  }
  const metadata: Record<string, string> = {
    [META.volumeName]: own.name,
    [META.volumeId]: own.volumeId,
    [META.fingerprint]: own.fingerprint,
    [META.capacity]: String(own.capacity),
  };
  if (own.pvcName) metadata[META.pvcName] = own.pvcName;
  if (own.pvcNamespace) metadata[META.pvcNamespace] = own.pvcNamespace;
  await store.putMarker(bucket, prefix, metadata, signal);
  log.info("Prefix {prefix} of bucket {bucket} created for volume {name}", {
    prefix,
    bucket,
    name: own.name,
  });
}
