/**
 * Background work that the real control plane's controllers do after deletes:
 *
 * 1. ownerReference garbage collection: an object whose owners (matched by uid) are all gone is
 *    deleted (Background propagation).
 * 2. `orphan` finalizer: ownerReferences to the owner are removed from dependents, then the
 *    finalizer.
 * 3. `foregroundDeletion` finalizer: dependents are deleted first, then the finalizer.
 * 4. Terminating namespaces: their content is deleted (pods without grace), then the namespace.
 * 5. Deleted CRDs: their custom resources are removed, then the finalizer and the type.
 *
 * A sweep runs shortly after any change that may need it; each sweep is bounded by the number of
 * stored objects, and sweeps repeat until nothing changes.
 *
 * @module
 */
import type { DeleteOptions, DeleteResult } from "./deletion.ts";
import type { ObjectStore } from "./object_store.ts";
import { clone, isObject, type JsonObject, meta } from "./json_value.ts";
import { logger } from "../../../src/util/log.ts";
import { type ResourceRegistry, type ResourceType, storageKey } from "./resources.ts";

const log = logger("apiserver", "gc");

/** Delay before a scheduled sweep, so that bursts of writes are handled together. */
const SWEEP_DELAY_MS = 5;

/**
 * What the collector needs of the cluster: the `Cluster` of `cluster.ts` has all of it. Declared
 * here, not imported, so that the cluster (which owns a collector) and this module form no import
 * cycle.
 */
export interface GcHost {
  readonly store: ObjectStore;
  readonly registry: ResourceRegistry;
  typeOfStorageKey(sk: string): ResourceType | undefined;
  delete(t: ResourceType, ns: string, name: string, opts?: DeleteOptions): DeleteResult;
  commit(
    t: ResourceType,
    current: JsonObject,
    proposed: JsonObject,
    w: { readonly manager: string },
    opts: { subresource?: string | undefined; track: boolean },
  ): JsonObject;
  finalizeIfReady(t: ResourceType, obj: JsonObject): void;
}

/** Removes dependents and completes system finalizers. */
export class GarbageCollector {
  #cluster: GcHost;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  /** Create a collector for `cluster`. */
  constructor(cluster: GcHost) {
    this.#cluster = cluster;
  }

  /** Request a sweep soon. */
  schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      try {
        if (this.sweep()) this.schedule();
      } catch (err) {
        log.warn("Garbage collection sweep failed: {error}", { error: String(err) });
      }
    }, SWEEP_DELAY_MS);
  }

  /** Cancel pending sweeps. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** One pass; returns true when it changed something. */
  sweep(): boolean {
    const c = this.#cluster;
    // Read-only references: anything that is modified below is cloned first.
    const all = [...c.store.scan()] as [string, JsonObject][];
    const uids = new Set(all.map(([, o]) => String(meta(o).uid)));
    const byOwner = new Map<string, [string, JsonObject][]>();
    for (const entry of all) {
      for (const r of (meta(entry[1]).ownerReferences ?? []) as JsonObject[]) {
        const list = byOwner.get(String(r.uid)) ?? [];
        list.push(entry);
        byOwner.set(String(r.uid), list);
      }
    }
    let changed = false;
    for (const [sk, obj] of all) {
      const t = c.typeOfStorageKey(sk);
      if (!t) continue;
      const m = meta(obj);
      const ns = String(m.namespace ?? "");
      const name = String(m.name);
      const dependents = byOwner.get(String(m.uid)) ?? [];
      const finalizers = (m.finalizers ?? []) as string[];
      const tryDelete = (fn: () => void) => {
        try {
          fn();
          changed = true;
        } catch {
          // Raced with another writer; the next sweep retries.
        }
      };
      const refs = (m.ownerReferences ?? []) as JsonObject[];
      if (refs.length && refs.every((r) => !uids.has(String(r.uid))) && !m.deletionTimestamp) {
        tryDelete(() => c.delete(t, ns, name, { gracePeriodSeconds: 0 }));
        continue;
      }
      if (!m.deletionTimestamp) continue;
      if (finalizers.includes("orphan")) {
        for (const [dsk, d] of dependents) {
          const dt = c.typeOfStorageKey(dsk);
          if (!dt) continue;
          const current = c.store.get(dsk, String(meta(d).namespace ?? ""), String(meta(d).name));
          if (!current) continue;
          const next = clone(current);
          const dm = meta(next);
          const refs = ((dm.ownerReferences ?? []) as JsonObject[]).filter((r) => r.uid !== m.uid);
          if (refs.length) dm.ownerReferences = refs;
          else delete dm.ownerReferences;
          tryDelete(() =>
            c.commit(dt, current, next, { manager: "garbage-collector" }, { track: false })
          );
        }
        tryDelete(() => this.#dropFinalizer(sk, obj, "orphan"));
      } else if (finalizers.includes("foregroundDeletion")) {
        for (const [dsk, d] of dependents) {
          const dt = c.typeOfStorageKey(dsk);
          const dm = meta(d);
          if (dt && !dm.deletionTimestamp) {
            tryDelete(() =>
              c.delete(dt, String(dm.namespace ?? ""), String(dm.name), { gracePeriodSeconds: 0 })
            );
          }
        }
        if (!dependents.length) tryDelete(() => this.#dropFinalizer(sk, obj, "foregroundDeletion"));
      }
      if (t.kind === "Namespace" && t.group === "") {
        changed = this.#drainNamespace(name) || changed;
      }
      if (t.kind === "CustomResourceDefinition") changed = this.#dropCrd(obj) || changed;
    }
    return changed;
  }

  #dropFinalizer(sk: string, stale: JsonObject, finalizer: string): void {
    const c = this.#cluster;
    const t = c.typeOfStorageKey(sk)!;
    const current = c.store.get(sk, String(meta(stale).namespace ?? ""), String(meta(stale).name));
    if (!current) return;
    const obj = clone(current);
    const m = meta(obj);
    m.finalizers = ((m.finalizers ?? []) as string[]).filter((f) => f !== finalizer);
    if (!(m.finalizers as string[]).length) delete m.finalizers;
    c.commit(t, current, obj, {
      manager: "garbage-collector",
    }, { track: false });
  }

  #drainNamespace(ns: string): boolean {
    const c = this.#cluster;
    let remaining = 0;
    for (const t of c.registry.all()) {
      if (!t.namespaced || (t.group === "events.k8s.io")) continue;
      for (const o of c.store.list(storageKey(t), ns)) {
        remaining++;
        if (meta(o).deletionTimestamp && meta(o).deletionGracePeriodSeconds === 0) continue;
        try {
          c.delete(t, ns, String(meta(o).name), { gracePeriodSeconds: 0 });
        } catch {
          // Gone already.
        }
      }
    }
    if (remaining > 0) return true;
    const t = c.typeOfStorageKey("/namespaces")!;
    const current = c.store.get("/namespaces", "", ns);
    if (!current) return false;
    const next = clone(current);
    next.spec = { ...(isObject(next.spec) ? next.spec : {}), finalizers: [] };
    const stored = c.commit(t, current, next, { manager: "namespace-controller" }, {
      track: false,
    });
    c.finalizeIfReady(t, stored);
    return true;
  }

  #dropCrd(crd: JsonObject): boolean {
    const c = this.#cluster;
    const spec = (crd.spec ?? {}) as JsonObject;
    const names = (spec.names ?? {}) as JsonObject;
    const sk = `${spec.group}/${names.plural}`;
    const items = c.store.list(sk);
    const t = c.typeOfStorageKey(sk);
    for (const o of items) {
      const m = meta(o);
      if (t) {
        try {
          c.store.remove(sk, String(m.namespace ?? ""), String(m.name));
        } catch {
          // Ignore.
        }
      }
    }
    c.store.dropAll(sk);
    this.#dropFinalizer(
      "apiextensions.k8s.io/customresourcedefinitions",
      crd,
      "customresourcecleanup.apiextensions.k8s.io",
    );
    return true;
  }
}
