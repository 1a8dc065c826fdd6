/**
 * {@link FakeS3}: an in-memory S3 with several accounts, for unit tests of the provisioning code.
 * It behaves like RGW where the controller cares: re-creating your own bucket succeeds, another
 * account's bucket is `bucket-taken` on create and `forbidden` on head, a non-empty bucket cannot be
 * deleted, unknown keys are `bad-credentials`, and `down` makes every call `unreachable`.
 *
 * @module
 */
import {
  type BucketState,
  type BucketStore,
  type BucketStoreFactory,
  type Listing,
  S3StoreError,
  type StoreTarget,
} from "./bucket_store.ts";

/** A bucket of the fake. */
export interface FakeBucket {
  /** Owning access key id. */
  owner: string;
  /** Tags. */
  tags: Record<string, string>;
  /** Objects: key → user metadata. */
  objects: Map<string, Record<string, string>>;
  /** Noncurrent versions (counted as content, removed by deleteAll). */
  oldVersions: string[];
}

/** The in-memory S3 world. */
export class FakeS3 {
  /** Buckets by name. */
  readonly buckets = new Map<string, FakeBucket>();
  /** Access key id → secret. Unknown keys get `bad-credentials`. */
  readonly accounts = new Map<string, string>();
  /** Access key ids that may read but not create/delete (everything but head/list → access-denied). */
  readonly readOnly = new Set<string>();
  /** When true, every call fails `unreachable`. */
  down = false;
  /** Every call, as `op bucket[/key]`, for assertions. */
  readonly calls: string[] = [];

  /** Add an account. */
  addAccount(accessKeyId: string, secretAccessKey: string): this {
    this.accounts.set(accessKeyId, secretAccessKey);
    return this;
  }

  /** Add a bucket directly (e.g. a foreign one). */
  addBucket(name: string, owner: string, tags: Record<string, string> = {}): FakeBucket {
    const b: FakeBucket = { owner, tags, objects: new Map(), oldVersions: [] };
    this.buckets.set(name, b);
    return b;
  }

  /** A factory handing out stores of this world. */
  factory(): BucketStoreFactory {
    return (target) => new FakeBucketStore(this, target);
  }
}

class FakeBucketStore implements BucketStore {
  readonly #s3: FakeS3;
  readonly #target: StoreTarget;

  constructor(s3: FakeS3, target: StoreTarget) {
    this.#s3 = s3;
    this.#target = target;
  }

  #enter(op: string, what: string, write = false): string {
    const s3 = this.#s3;
    s3.calls.push(`${op} ${what}`);
    if (s3.down) throw new S3StoreError("unreachable", "connect ECONNREFUSED (fake S3 is down)");
    const { accessKeyId, secretAccessKey } = this.#target.credentials;
    if (s3.accounts.get(accessKeyId) !== secretAccessKey) {
      throw new S3StoreError("bad-credentials", "InvalidAccessKeyId", 403);
    }
    if (write && s3.readOnly.has(accessKeyId)) {
      throw new S3StoreError("access-denied", "AccessDenied", 403);
    }
    return accessKeyId;
  }

  #own(bucket: string, me: string): FakeBucket {
    const b = this.#s3.buckets.get(bucket);
    if (!b) throw new S3StoreError("no-such-bucket", "NoSuchBucket", 404);
    if (b.owner !== me) throw new S3StoreError("access-denied", "AccessDenied", 403);
    return b;
  }

  head(bucket: string): Promise<BucketState> {
    const me = this.#enter("head", bucket);
    const b = this.#s3.buckets.get(bucket);
    return Promise.resolve(!b ? "missing" : b.owner === me ? "exists" : "forbidden");
  }

  createBucket(bucket: string): Promise<void> {
    const me = this.#enter("createBucket", bucket, true);
    const b = this.#s3.buckets.get(bucket);
    if (b && b.owner !== me) {
      return Promise.reject(new S3StoreError("bucket-taken", "BucketAlreadyExists", 409));
    }
    if (!b) this.#s3.addBucket(bucket, me);
    return Promise.resolve();
  }

  getTags(bucket: string): Promise<Record<string, string>> {
    const me = this.#enter("getTags", bucket);
    return Promise.resolve({ ...this.#own(bucket, me).tags });
  }

  putTags(bucket: string, tags: Record<string, string>): Promise<void> {
    const me = this.#enter("putTags", bucket, true);
    this.#own(bucket, me).tags = { ...tags };
    return Promise.resolve();
  }

  headObject(bucket: string, key: string): Promise<Record<string, string> | undefined> {
    const me = this.#enter("headObject", `${bucket}/${key}`);
    const meta = this.#own(bucket, me).objects.get(key);
    return Promise.resolve(meta ? { ...meta } : undefined);
  }

  putMarker(bucket: string, key: string, metadata: Record<string, string>): Promise<void> {
    const me = this.#enter("putMarker", `${bucket}/${key}`, true);
    this.#own(bucket, me).objects.set(key, { ...metadata });
    return Promise.resolve();
  }

  listSome(bucket: string, prefix: string, limit: number, exceptKey?: string): Promise<Listing> {
    const me = this.#enter("listSome", `${bucket}/${prefix}`);
    const b = this.#own(bucket, me);
    const all = [...b.objects.keys(), ...b.oldVersions]
      .filter((k) => k.startsWith(prefix) && k !== exceptKey)
      .sort();
    return Promise.resolve({ keys: all.slice(0, limit), truncated: all.length > limit });
  }

  deleteAll(bucket: string, prefix: string): Promise<number> {
    const me = this.#enter("deleteAll", `${bucket}/${prefix}`, true);
    const b = this.#own(bucket, me);
    let n = 0;
    for (const k of [...b.objects.keys()]) {
      if (k.startsWith(prefix)) {
        b.objects.delete(k);
        n++;
      }
    }
    const keep = b.oldVersions.filter((k) => !k.startsWith(prefix));
    n += b.oldVersions.length - keep.length;
    b.oldVersions = keep;
    return Promise.resolve(n);
  }

  deleteObject(bucket: string, key: string): Promise<void> {
    const me = this.#enter("deleteObject", `${bucket}/${key}`, true);
    this.#own(bucket, me).objects.delete(key);
    return Promise.resolve();
  }

  deleteBucket(bucket: string): Promise<void> {
    const me = this.#enter("deleteBucket", bucket, true);
    const b = this.#s3.buckets.get(bucket);
    if (!b) return Promise.resolve();
    if (b.owner !== me) {
      return Promise.reject(new S3StoreError("access-denied", "AccessDenied", 403));
    }
    if (b.objects.size > 0 || b.oldVersions.length > 0) {
      return Promise.reject(new S3StoreError("not-empty", "BucketNotEmpty", 409));
    }
    this.#s3.buckets.delete(bucket);
    return Promise.resolve();
  }

  close(): void {}
}
