/**
 * Read-your-writes on top of an informer cache (the "expectations" of controller-runtime, with an
 * expiry that upstream lacks: `github.com/awslabs/mountpoint-s3-csi-driver` issue 843).
 *
 * After the controller writes an object it records the API server's answer here; reads return that
 * answer until the informer has caught up, so a second reconcile right after a create never creates
 * a duplicate or updates a stale copy. "Caught up" is decided by resourceVersions, never by time
 * alone: the cache holds the object at the written version or later, or the informer has seen
 * every event up to the written version (then an object missing from the cache was deleted since).
 * Only when versions cannot be compared (not numeric) does {@link FreshView.ttlMs} end an entry —
 * an informer lagging behind a burst of writes must not make the controller forget what it just
 * created (seen at 10,000 pods: a second Mountpoint Pod for the same attachment). Deletions are
 * remembered for {@link FreshView.ttlMs}.
 *
 * @module
 */
import type { KubeObject } from "../kube/client.ts";
import { objectKey } from "../kube/client.ts";

interface Entry<T> {
  readonly obj: T | null;
  readonly at: number;
}

/** Compare resourceVersions: numeric when both are integers (true for etcd and the emulator). */
export function newerOrEqual(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b) return false;
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) >= BigInt(b);
  return a === b;
}

function comparable(rv: string | undefined): boolean {
  return rv !== undefined && /^\d+$/.test(rv);
}

/** A cache view that prefers the controller's own recent writes. */
export class FreshView<T extends KubeObject> {
  readonly #cache: {
    get(key: string): T | undefined;
    list(): T[];
    readonly resourceVersion?: string;
  };
  readonly #overlay = new Map<string, Entry<T>>();
  /** How long a write is trusted over the cache. */
  readonly ttlMs: number;
  readonly #now: () => number;

  /**
   * Wrap `cache` (an informer). When it offers `on()`, the view follows its events: an object the
   * cache shows at the written version or later, or deletes, drops the remembered write.
   */
  constructor(
    cache: {
      get(key: string): T | undefined;
      list(): T[];
      on?(h: { add?(o: T): void; update?(old: T, o: T): void; delete?(o: T): void }): unknown;
      /** The last resourceVersion the informer has seen (all events up to it are applied). */
      readonly resourceVersion?: string;
    },
    ttlMs = 30_000,
    now: () => number = Date.now,
  ) {
    this.#cache = cache;
    this.ttlMs = ttlMs;
    this.#now = now;
    cache.on?.({
      add: (o) => this.#observe(o),
      update: (_, o) => this.#observe(o),
      delete: (o) => this.#overlay.delete(objectKey(o)),
    });
  }

  #observe(obj: T): void {
    const key = objectKey(obj);
    const entry = this.#overlay.get(key);
    if (
      entry?.obj && newerOrEqual(obj.metadata?.resourceVersion, entry.obj.metadata?.resourceVersion)
    ) {
      this.#overlay.delete(key);
    }
  }

  /** Freshest known state of `key`; undefined when absent or deleted. */
  get(key: string): T | undefined {
    const cached = this.#cache.get(key);
    const entry = this.#overlay.get(key);
    if (!entry) return cached;
    const expired = this.#now() - entry.at > this.ttlMs;
    if (entry.obj === null) {
      if (!expired) return undefined;
      this.#overlay.delete(key);
      return cached;
    }
    const written = entry.obj.metadata?.resourceVersion;
    if (
      (cached && newerOrEqual(cached.metadata?.resourceVersion, written)) ||
      newerOrEqual(this.#cache.resourceVersion, written)
    ) {
      // The cache has our write (or newer), or has seen every event past it: trust the cache.
      this.#overlay.delete(key);
      return cached;
    }
    if (expired && !comparable(written)) {
      this.#overlay.delete(key);
      return cached;
    }
    return entry.obj;
  }

  /** Record the object the API server returned for a create or update. */
  wrote(obj: T): void {
    this.#overlay.set(objectKey(obj), { obj, at: this.#now() });
  }

  /** Record a deletion. */
  deleted(key: string): void {
    this.#overlay.set(key, { obj: null, at: this.#now() });
  }

  /** Forget `key` (e.g. after a conflict, so the next read goes to the cache). */
  forget(key: string): void {
    this.#overlay.delete(key);
  }

  /** Number of writes not yet seen in the cache (pending expectations, for metrics). */
  get pending(): number {
    return this.#overlay.size;
  }
}
