/**
 * {@link BucketStore}: the few S3 operations dynamic provisioning needs (create/tag/inspect/empty/
 * delete a bucket, a marker object per prefix volume), behind an interface so the CSI Controller
 * service is unit-tested against {@link FakeS3} (`fake_bucket_store.ts`) and run against real S3
 * with `aws_bucket_store.ts`.
 *
 * Every failure is an {@link S3StoreError} with a {@link S3ErrorKind}, so callers map failures to
 * gRPC codes without matching message text.
 *
 * @module
 */

/** Static credentials for one S3 account. */
export interface S3Credentials {
  /** Access key id (not secret; may be logged). */
  readonly accessKeyId: string;
  /** Secret access key. */
  readonly secretAccessKey: string;
  /** Session token of temporary credentials. */
  readonly sessionToken?: string | undefined;
}

/** Classes of S3 failure the controller distinguishes. */
export type S3ErrorKind =
  /** 403: the credentials may not do this (or the bucket belongs to another account). */
  | "access-denied"
  /** 401/403 InvalidAccessKeyId, SignatureDoesNotMatch: the credentials themselves are wrong. */
  | "bad-credentials"
  /** 404 NoSuchBucket. */
  | "no-such-bucket"
  /** 409 BucketAlreadyExists: the name is taken by another account. */
  | "bucket-taken"
  /** 409 BucketNotEmpty. */
  | "not-empty"
  /** 400 InvalidBucketName. */
  | "invalid-bucket-name"
  /** 400 InvalidLocationConstraint / IllegalLocationConstraintException: unknown region. */
  | "invalid-region"
  /** No HTTP answer: connection refused, DNS, TLS, timeout. */
  | "unreachable"
  /** Anything else (5xx, unexpected 4xx). */
  | "other";

/** A classified S3 failure. */
export class S3StoreError extends Error {
  /** Error name. */
  override name = "S3StoreError";
  /** Create an error of `kind`; `status` is the HTTP status when there was an answer. */
  constructor(
    readonly kind: S3ErrorKind,
    message: string,
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** What {@link BucketStore.head} found. */
export type BucketState = "exists" | "missing" | "forbidden";

/** Result of {@link BucketStore.listSome}. */
export interface Listing {
  /** Up to `limit` keys (object versions and delete markers included), for messages. */
  readonly keys: string[];
  /** True when there are more than `keys`. */
  readonly truncated: boolean;
}

/** S3 operations of one account (credentials) against one endpoint and region. */
export interface BucketStore {
  /** HeadBucket: `forbidden` means the bucket exists but these credentials may not see it. */
  head(bucket: string, signal?: AbortSignal): Promise<BucketState>;
  /** CreateBucket. Re-creating a bucket the account owns succeeds. @throws {S3StoreError} `bucket-taken` */
  createBucket(bucket: string, signal?: AbortSignal): Promise<void>;
  /** GetBucketTagging; `{}` when the bucket has no tags. */
  getTags(bucket: string, signal?: AbortSignal): Promise<Record<string, string>>;
  /** PutBucketTagging (replaces all tags). */
  putTags(bucket: string, tags: Record<string, string>, signal?: AbortSignal): Promise<void>;
  /** HeadObject: the object's user metadata, undefined when there is no such object. */
  headObject(
    bucket: string,
    key: string,
    signal?: AbortSignal,
  ): Promise<Record<string, string> | undefined>;
  /** PutObject of an empty object with user metadata. */
  putMarker(
    bucket: string,
    key: string,
    metadata: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<void>;
  /** Up to `limit` keys under `prefix` (all versions), leaving out `exceptKey`. */
  listSome(
    bucket: string,
    prefix: string,
    limit: number,
    exceptKey?: string,
    signal?: AbortSignal,
  ): Promise<Listing>;
  /**
   * Delete every object version, delete marker and unfinished multipart upload under `prefix`.
   * Resolves with the number of versions deleted.
   */
  deleteAll(bucket: string, prefix: string, signal?: AbortSignal): Promise<number>;
  /** DeleteObject of one key (unversioned delete). */
  deleteObject(bucket: string, key: string, signal?: AbortSignal): Promise<void>;
  /** DeleteBucket. Missing bucket → resolves. @throws {S3StoreError} `not-empty` */
  deleteBucket(bucket: string, signal?: AbortSignal): Promise<void>;
  /** Release connections. */
  close(): void;
}

/** Where a store connects to. */
export interface StoreTarget {
  /** Credentials. */
  readonly credentials: S3Credentials;
  /** Signing region. */
  readonly region: string;
}

/** Makes a {@link BucketStore} for a target (the endpoint and TLS settings are the factory's). */
export type BucketStoreFactory = (target: StoreTarget) => BucketStore;
