/**
 * In-memory object storage with one global, increasing resourceVersion (like etcd's revision).
 * Objects are kept per storage key (`group/plural`) and `namespace/name`; every write publishes a
 * {@link StoreEvent} on the {@link WatchHub}. Reads return copies.
 *
 * This layer does no validation or defaulting: the request handlers decide what to write.
 *
 * @module
 */
import { clone, type JsonObject, meta } from "./json_value.ts";
import { WatchHub } from "./watch_hub.ts";

function objKey(ns: string, name: string): string {
  return `${ns}/${name}`;
}

/** Options for {@link ObjectStore}. */
export interface ObjectStoreOptions {
  /** Watch history length in events. @default 10000 */
  readonly historySize?: number;
}

/** All objects of the emulated cluster. */
export class ObjectStore {
  #rv = 1;
  #data = new Map<string, Map<string, JsonObject>>();
  /** Change fan-out and history. */
  readonly hub: WatchHub;

  /** Create an empty store. */
  constructor(options: ObjectStoreOptions = {}) {
    this.hub = new WatchHub(options.historySize);
  }

  /** The current global resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  #bucket(storageKey: string): Map<string, JsonObject> {
    let b = this.#data.get(storageKey);
    if (!b) this.#data.set(storageKey, b = new Map());
    return b;
  }

  /** A copy of one object, or undefined. */
  get(storageKey: string, ns: string, name: string): JsonObject | undefined {
    return clone(this.#data.get(storageKey)?.get(objKey(ns, name)));
  }

  /** Copies of all objects of a type (optionally one namespace), sorted by namespace and name. */
  list(storageKey: string, ns?: string): JsonObject[] {
    const b = this.#data.get(storageKey);
    if (!b) return [];
    const keys = [...b.keys()].filter((k) => ns === undefined || k.startsWith(`${ns}/`)).sort();
    return keys.map((k) => clone(b.get(k)!));
  }

  /**
   * Every stored object with its storage key, **not copied**: callers must not modify them.
   * Used by garbage collection, which scans everything on each sweep.
   */
  *scan(): Generator<[string, Readonly<JsonObject>]> {
    for (const [sk, b] of this.#data) for (const o of b.values()) yield [sk, o];
  }

  /** Insert a new object; sets `metadata.resourceVersion`. Returns the stored copy. */
  create(storageKey: string, obj: JsonObject): JsonObject {
    const m = meta(obj);
    const rv = ++this.#rv;
    m.resourceVersion = String(rv);
    const stored = clone(obj);
    this.#bucket(storageKey).set(objKey(String(m.namespace ?? ""), String(m.name)), stored);
    this.hub.publish({ type: "ADDED", storageKey, object: clone(stored), rv });
    return clone(stored);
  }

  /** Replace an existing object; sets a new `metadata.resourceVersion`. */
  update(storageKey: string, obj: JsonObject): JsonObject {
    const m = meta(obj);
    const key = objKey(String(m.namespace ?? ""), String(m.name));
    const prev = this.#bucket(storageKey).get(key);
    const rv = ++this.#rv;
    m.resourceVersion = String(rv);
    const stored = clone(obj);
    this.#bucket(storageKey).set(key, stored);
    this.hub.publish({
      type: prev ? "MODIFIED" : "ADDED",
      storageKey,
      object: clone(stored),
      ...(prev ? { prev } : {}),
      rv,
    });
    return clone(stored);
  }

  /** Remove an object. The DELETED event carries the deletion resourceVersion. */
  remove(storageKey: string, ns: string, name: string): JsonObject | undefined {
    const b = this.#data.get(storageKey);
    const prev = b?.get(objKey(ns, name));
    if (!b || !prev) return undefined;
    b.delete(objKey(ns, name));
    const rv = ++this.#rv;
    const gone = clone(prev);
    meta(gone).resourceVersion = String(rv);
    this.hub.publish({ type: "DELETED", storageKey, object: clone(gone), prev, rv });
    return gone;
  }

  /** Drop every object of a storage key without events (used when a CRD is removed). */
  dropAll(storageKey: string): void {
    this.#data.delete(storageKey);
  }
}
