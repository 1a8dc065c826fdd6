/**
 * {@link BucketStore} on `@aws-sdk/client-s3` (through {@link S3ClientFactory}), with SDK errors
 * classified into {@link S3StoreError} kinds.
 *
 * @module
 */
import type { S3Client } from "@aws-sdk/client-s3";
import { errorMessage } from "../util/errors.ts";
import {
  type BucketState,
  type BucketStore,
  type BucketStoreFactory,
  type Listing,
  S3StoreError,
  type StoreTarget,
} from "./bucket_store.ts";
import type { S3ClientFactory } from "./client_factory.ts";

type Sdk = typeof import("@aws-sdk/client-s3");

/** SDK call options with an optional abort signal. */
function o(signal: AbortSignal | undefined): { abortSignal?: AbortSignal } {
  return signal ? { abortSignal: signal } : {};
}

/** Classify an SDK (or fetch) error. */
export function classifyS3Error(err: unknown): S3StoreError {
  if (err instanceof S3StoreError) return err;
  const e = err as { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } };
  const status = e?.$metadata?.httpStatusCode;
  const code = e?.Code ?? e?.name ?? "";
  // fetch failures hide the reason (TLS, DNS, refused) in the cause chain.
  let detail = errorMessage(err);
  let c = (err as Error)?.cause;
  for (let depth = 0; c && depth < 3; depth++) {
    const m = errorMessage(c);
    if (!detail.includes(m)) detail += `: ${m}`;
    c = (c as Error)?.cause;
  }
  const message = `${code && !detail.includes(code) ? `${code}: ` : ""}${detail}`;
  const make = (kind: S3StoreError["kind"]) =>
    new S3StoreError(kind, message, status, { cause: err });
  if (
    ["InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"].includes(code)
  ) {
    return make("bad-credentials");
  }
  if (code === "BucketAlreadyExists") return make("bucket-taken");
  if (code === "BucketNotEmpty") return make("not-empty");
  if (code === "NoSuchBucket") return make("no-such-bucket");
  if (code === "InvalidBucketName") return make("invalid-bucket-name");
  if (code === "InvalidLocationConstraint" || code === "IllegalLocationConstraintException") {
    return make("invalid-region");
  }
  if (status === 401 || status === 403 || code === "AccessDenied") return make("access-denied");
  if (status === 404) return make("no-such-bucket");
  if (status === undefined) return make("unreachable");
  return make("other");
}

/** A factory of {@link AwsBucketStore}s sharing `clients`' settings. */
export function awsBucketStores(clients: S3ClientFactory): BucketStoreFactory {
  return (target) => new AwsBucketStore(clients, target);
}

/** {@link BucketStore} with the AWS SDK. */
export class AwsBucketStore implements BucketStore {
  readonly #clients: S3ClientFactory;
  readonly #target: StoreTarget;
  #client: Promise<{ sdk: Sdk; s3: S3Client }> | undefined;

  /** Create a store; the client is made on first use. */
  constructor(clients: S3ClientFactory, target: StoreTarget) {
    this.#clients = clients;
    this.#target = target;
  }

  async #call<T>(fn: (sdk: Sdk, s3: S3Client) => Promise<T>): Promise<T> {
    this.#client ??= (async () => ({
      sdk: await import("@aws-sdk/client-s3"),
      s3: await this.#clients.create(this.#target),
    }))();
    const { sdk, s3 } = await this.#client;
    try {
      return await fn(sdk, s3);
    } catch (err) {
      throw classifyS3Error(err);
    }
  }

  /** {@inheritDoc BucketStore.head} */
  async head(bucket: string, signal?: AbortSignal): Promise<BucketState> {
    try {
      await this.#call((sdk, s3) =>
        s3.send(new sdk.HeadBucketCommand({ Bucket: bucket }), o(signal))
      );
      return "exists";
    } catch (err) {
      const e = err as S3StoreError;
      if (e.kind === "no-such-bucket") return "missing";
      // HEAD has no body: a 403 is either a foreign bucket or bad keys; tell them apart with a
      // call that needs valid keys but no bucket.
      if (e.kind === "access-denied") {
        await this.#call((sdk, s3) => s3.send(new sdk.ListBucketsCommand({}), o(signal))).catch(
          (listErr: S3StoreError) => {
            if (listErr.kind === "bad-credentials") throw listErr;
          },
        );
        return "forbidden";
      }
      throw err;
    }
  }

  /** {@inheritDoc BucketStore.createBucket} */
  async createBucket(bucket: string, signal?: AbortSignal): Promise<void> {
    try {
      // us-east-1 is the default location and must not be named (AWS rejects it).
      const region = this.#target.region;
      await this.#call((sdk, s3) =>
        s3.send(
          new sdk.CreateBucketCommand({
            Bucket: bucket,
            ...(region && region !== "us-east-1"
              ? { CreateBucketConfiguration: { LocationConstraint: region as never } }
              : {}),
          }),
          o(signal),
        )
      );
    } catch (err) {
      if ((err as S3StoreError).message.includes("BucketAlreadyOwnedByYou")) return;
      throw err;
    }
  }

  /** {@inheritDoc BucketStore.getTags} */
  async getTags(bucket: string, signal?: AbortSignal): Promise<Record<string, string>> {
    try {
      const out = await this.#call((sdk, s3) =>
        s3.send(new sdk.GetBucketTaggingCommand({ Bucket: bucket }), o(signal))
      );
      return Object.fromEntries((out.TagSet ?? []).map((t) => [t.Key ?? "", t.Value ?? ""]));
    } catch (err) {
      if (/NoSuchTagSet/i.test((err as Error).message)) return {};
      throw err;
    }
  }

  /** {@inheritDoc BucketStore.putTags} */
  async putTags(bucket: string, tags: Record<string, string>, signal?: AbortSignal): Promise<void> {
    const TagSet = Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));
    await this.#call((sdk, s3) =>
      s3.send(new sdk.PutBucketTaggingCommand({ Bucket: bucket, Tagging: { TagSet } }), o(signal))
    );
  }

  /** {@inheritDoc BucketStore.headObject} */
  async headObject(
    bucket: string,
    key: string,
    signal?: AbortSignal,
  ): Promise<Record<string, string> | undefined> {
    try {
      const out = await this.#call((sdk, s3) =>
        s3.send(new sdk.HeadObjectCommand({ Bucket: bucket, Key: key }), o(signal))
      );
      return out.Metadata ?? {};
    } catch (err) {
      const e = err as S3StoreError;
      // HEAD of a missing key: 404 without a code, classified as no-such-bucket.
      if (e.kind === "no-such-bucket" && !/NoSuchBucket/.test(e.message)) return undefined;
      throw err;
    }
  }

  /** {@inheritDoc BucketStore.putMarker} */
  async putMarker(
    bucket: string,
    key: string,
    metadata: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<void> {
    await this.#call((sdk, s3) =>
      s3.send(
        new sdk.PutObjectCommand({ Bucket: bucket, Key: key, Body: "", Metadata: metadata }),
        o(signal),
      )
    );
  }

  /** {@inheritDoc BucketStore.listSome} */
  async listSome(
    bucket: string,
    prefix: string,
    limit: number,
    exceptKey?: string,
    signal?: AbortSignal,
  ): Promise<Listing> {
    const out = await this.#call((sdk, s3) =>
      s3.send(
        new sdk.ListObjectVersionsCommand({ Bucket: bucket, Prefix: prefix, MaxKeys: limit + 2 }),
        o(signal),
      )
    );
    const keys = [...(out.Versions ?? []), ...(out.DeleteMarkers ?? [])]
      .map((v) => v.Key ?? "")
      .filter((k) => k !== exceptKey);
    return { keys: keys.slice(0, limit), truncated: keys.length > limit || !!out.IsTruncated };
  }

  /** {@inheritDoc BucketStore.deleteAll} */
  async deleteAll(bucket: string, prefix: string, signal?: AbortSignal): Promise<number> {
    let deleted = 0;
    for (;;) {
      signal?.throwIfAborted();
      const out = await this.#call((sdk, s3) =>
        s3.send(
          new sdk.ListObjectVersionsCommand({ Bucket: bucket, Prefix: prefix, MaxKeys: 1000 }),
          o(signal),
        )
      );
      const objects = [...(out.Versions ?? []), ...(out.DeleteMarkers ?? [])].map((v) => ({
        Key: v.Key!,
        ...(v.VersionId ? { VersionId: v.VersionId } : {}),
      }));
      if (objects.length === 0) break;
      const res = await this.#call((sdk, s3) =>
        s3.send(
          new sdk.DeleteObjectsCommand({
            Bucket: bucket,
            Delete: { Objects: objects, Quiet: true },
          }),
          o(signal),
        )
      );
      const failed = res.Errors ?? [];
      if (failed.length > 0) {
        const f = failed[0]!;
        throw new S3StoreError(
          f.Code === "AccessDenied" ? "access-denied" : "other",
          `DeleteObjects failed for ${failed.length} key(s), e.g. "${f.Key}": ${f.Code} ${
            f.Message ?? ""
          }`.trim(),
        );
      }
      deleted += objects.length;
    }
    for (;;) {
      const out = await this.#call((sdk, s3) =>
        s3.send(new sdk.ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix }), o(signal))
      );
      const uploads = out.Uploads ?? [];
      if (uploads.length === 0) break;
      for (const u of uploads) {
        await this.#call((sdk, s3) =>
          s3.send(
            new sdk.AbortMultipartUploadCommand({
              Bucket: bucket,
              Key: u.Key,
              UploadId: u.UploadId,
            }),
            o(signal),
          )
        );
      }
    }
    return deleted;
  }

  /** {@inheritDoc BucketStore.deleteObject} */
  async deleteObject(bucket: string, key: string, signal?: AbortSignal): Promise<void> {
    await this.#call((sdk, s3) =>
      s3.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: key }), o(signal))
    );
  }

  /** {@inheritDoc BucketStore.deleteBucket} */
  async deleteBucket(bucket: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.#call((sdk, s3) =>
        s3.send(new sdk.DeleteBucketCommand({ Bucket: bucket }), o(signal))
      );
    } catch (err) {
      if ((err as S3StoreError).kind === "no-such-bucket") return;
      throw err;
    }
  }

  /** {@inheritDoc BucketStore.close} */
  close(): void {
    void this.#client?.then(({ s3 }) => s3.destroy(), () => {});
  }
}
