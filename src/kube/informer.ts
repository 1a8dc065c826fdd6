/**
 * A list-and-watch cache of one resource (client-go's reflector + indexer + informer, reduced to
 * what we need).
 *
 * 1. LIST, replace the cache, emit add/update/delete for the differences.
 * 2. WATCH from the list's resourceVersion, applying events to the cache and emitting them.
 * 3. When the server ends the watch, watch again from the last seen resourceVersion.
 * 4. On 410 Gone, re-list at once; on any other error, back off (1 s doubling to 30 s) and re-list.
 *    Unlike client-node's informer, it never stops on an error.
 * 5. Every `resyncMs`, emit `update(obj, obj)` for every cached object so handlers re-check state.
 *
 * @module
 */
import type { KubeClient, KubeObject, ListOptions, WatchEvent } from "./client.ts";
import { objectKey } from "./client.ts";
import { GoneError, NotFoundError } from "./errors.ts";
import type { Resource } from "./resources.ts";
import { errorMessage, TimeoutError } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { pause } from "../util/sleep.ts";

/** Event handlers; each is optional. */
export interface InformerHandlers<T> {
  add?(obj: T): void;
  update?(old: T, obj: T): void;
  delete?(obj: T): void;
}

/** Options of {@link Informer}. */
export interface InformerOptions<T = KubeObject> extends ListOptions {
  /** Period of synthetic updates for every object; 0 disables. @default 0 */
  readonly resyncMs?: number;
  /** Server-side watch timeout; the watch is then re-opened from the last version. @default 300 */
  readonly watchTimeoutSeconds?: number;
  /** Longest back-off after errors. @default 30000 */
  readonly maxBackoffMs?: number;
  /**
   * Applied to every object before it is cached and handed to handlers (client-go's
   * `SetTransform`): keep only what the owner reads, so thousands of cached objects stay small.
   */
  readonly transform?: (obj: T) => T;
}

/** Index function: the index values of an object. */
export type IndexFunc<T> = (obj: T) => readonly string[];

/** A cache of one resource kept current by list + watch. */
export class Informer<T extends KubeObject> {
  readonly #client: KubeClient;
  readonly #resource: Resource;
  readonly #options: InformerOptions<T>;
  readonly #store = new Map<string, T>();
  readonly #handlers: InformerHandlers<T>[] = [];
  readonly #indexFuncs = new Map<string, IndexFunc<T>>();
  readonly #indexes = new Map<string, Map<string, Set<string>>>();
  readonly #log = logger("kube", "informer");
  #synced = false;
  #syncWaiters: (() => void)[] = [];
  #resourceVersion = "";
  /** Number of LIST calls made (first sync and re-lists). */
  lists = 0;

  /** Create an informer; nothing happens until {@link run}. */
  constructor(client: KubeClient, resource: Resource, options: InformerOptions<T> = {}) {
    this.#client = client;
    this.#resource = resource;
    this.#options = options;
  }

  /** Register handlers. Call before {@link run} to see the initial adds. */
  on(handlers: InformerHandlers<T>): this {
    this.#handlers.push(handlers);
    return this;
  }

  /** Add an index; {@link byIndex} looks objects up by it. */
  addIndex(name: string, fn: IndexFunc<T>): this {
    this.#indexFuncs.set(name, fn);
    const index = new Map<string, Set<string>>();
    this.#indexes.set(name, index);
    for (const [key, obj] of this.#store) this.#indexAdd(name, fn, key, obj);
    return this;
  }

  /** The last resourceVersion seen (list or watch event, bookmarks included); "" before a list. */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** True once the first list has been applied. */
  get hasSynced(): boolean {
    return this.#synced;
  }

  /** Cached object by `namespace/name` (or `name`). */
  get(key: string): T | undefined {
    return this.#store.get(key);
  }

  /** Every cached object. */
  list(): T[] {
    return [...this.#store.values()];
  }

  /** Cached objects whose index `name` contains `value`. */
  byIndex(name: string, value: string): T[] {
    const keys = this.#indexes.get(name)?.get(value);
    if (!keys) return [];
    return [...keys].map((k) => this.#store.get(k)!).filter(Boolean);
  }

  /** Resolve once synced; reject after `timeoutMs` or when `signal` aborts. */
  waitForSync(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        cleanup();
        reject(new TimeoutError(`the ${this.#resource.plural} cache to sync`, timeoutMs));
      }, timeoutMs);
      const onAbort = () => {
        cleanup();
        reject(signal?.reason ?? new Error("aborted"));
      };
      const done = () => {
        cleanup();
        resolve();
      };
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.#syncWaiters = this.#syncWaiters.filter((w) => w !== done);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#syncWaiters.push(done);
      // Setting up the timer may run queued microtasks (first use of timers): the sync may already be done.
      if (this.#synced) done();
    });
  }

  /** List and watch until `signal` aborts. Never rejects because of API errors. */
  async run(signal: AbortSignal): Promise<void> {
    let backoff = 0;
    let resync: ReturnType<typeof setInterval> | undefined;
    if (this.#options.resyncMs) {
      resync = setInterval(() => {
        for (const obj of this.#store.values()) this.#emit("update", obj, obj);
      }, this.#options.resyncMs);
    }
    try {
      while (!signal.aborted) {
        try {
          if (!this.#resourceVersion) await this.#relist(signal);
          await this.#client.watch<T>(
            this.#resource,
            {
              ...this.#listOptions(),
              resourceVersion: this.#resourceVersion,
              timeoutSeconds: this.#options.watchTimeoutSeconds ?? 300,
              signal,
            },
            (event) => this.#apply(event),
          );
          backoff = 0;
        } catch (err) {
          if (signal.aborted) break;
          this.#resourceVersion = "";
          if (err instanceof GoneError) {
            this.#log.debug("Watch of {resource} expired; re-listing", {
              resource: this.#resource.plural,
            });
            continue;
          }
          backoff = Math.min(backoff ? backoff * 2 : 1000, this.#options.maxBackoffMs ?? 30_000);
          const hint = err instanceof NotFoundError && this.#resource.group.includes(".")
            ? ` (is the CustomResourceDefinition ${this.#resource.plural}.${this.#resource.group} installed?)`
            : "";
          this.#log.warn("List/watch of {resource} failed, retrying in {ms} ms: {error}", {
            resource: this.#resource.plural,
            ms: backoff,
            error: errorMessage(err) + hint,
          });
          await pause(backoff, signal);
        }
      }
    } finally {
      clearInterval(resync);
    }
  }

  #listOptions(): ListOptions {
    const { namespace, labelSelector, fieldSelector, limit } = this.#options;
    return {
      ...(namespace ? { namespace } : {}),
      ...(labelSelector ? { labelSelector } : {}),
      ...(fieldSelector ? { fieldSelector } : {}),
      limit: limit ?? 500,
    };
  }

  async #relist(signal: AbortSignal): Promise<void> {
    this.lists++;
    const { items, resourceVersion } = await this.#client.list<T>(this.#resource, {
      ...this.#listOptions(),
      signal,
    });
    const seen = new Set<string>();
    const transform = this.#options.transform;
    for (const raw of items) {
      const obj = transform ? transform(raw) : raw;
      const key = objectKey(obj);
      seen.add(key);
      const old = this.#store.get(key);
      this.#put(key, obj);
      if (!old) this.#emit("add", obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) {
        this.#emit("update", old, obj);
      }
    }
    for (const [key, obj] of [...this.#store]) {
      if (!seen.has(key)) {
        this.#remove(key);
        this.#emit("delete", obj);
      }
    }
    this.#resourceVersion = resourceVersion;
    if (!this.#synced) {
      this.#synced = true;
      for (const w of [...this.#syncWaiters]) w();
    }
  }

  #apply(event: WatchEvent<T>): void {
    const rv = event.object?.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    if (event.type === "BOOKMARK") return;
    const obj = this.#options.transform ? this.#options.transform(event.object) : event.object;
    const key = objectKey(obj);
    const old = this.#store.get(key);
    if (event.type === "DELETED") {
      this.#remove(key);
      this.#emit("delete", old ?? obj);
      return;
    }
    this.#put(key, obj);
    if (old) this.#emit("update", old, obj);
    else this.#emit("add", obj);
  }

  #put(key: string, obj: T): void {
    const old = this.#store.get(key);
    if (old) { for (const [name, fn] of this.#indexFuncs) this.#indexRemove(name, fn, key, old); }
    this.#store.set(key, obj);
    for (const [name, fn] of this.#indexFuncs) this.#indexAdd(name, fn, key, obj);
  }

  #remove(key: string): void {
    const old = this.#store.get(key);
    if (!old) return;
    for (const [name, fn] of this.#indexFuncs) this.#indexRemove(name, fn, key, old);
    this.#store.delete(key);
  }

  #indexAdd(name: string, fn: IndexFunc<T>, key: string, obj: T): void {
    const index = this.#indexes.get(name)!;
    for (const v of fn(obj)) {
      let keys = index.get(v);
      if (!keys) index.set(v, keys = new Set());
      keys.add(key);
    }
  }

  #indexRemove(name: string, fn: IndexFunc<T>, key: string, obj: T): void {
    const index = this.#indexes.get(name)!;
    for (const v of fn(obj)) {
      const keys = index.get(v);
      keys?.delete(key);
      if (keys && keys.size === 0) index.delete(v);
    }
  }

  #emit(type: "add" | "delete", obj: T): void;
  #emit(type: "update", old: T, obj: T): void;
  #emit(type: "add" | "update" | "delete", a: T, b?: T): void {
    for (const h of this.#handlers) {
      try {
        if (type === "add") h.add?.(a);
        else if (type === "update") h.update?.(a, b!);
        else h.delete?.(a);
      } catch (err) {
        this.#log.error("Informer handler for {resource} threw: {error}", {
          resource: this.#resource.plural,
          error: errorMessage(err),
        });
      }
    }
  }
}
