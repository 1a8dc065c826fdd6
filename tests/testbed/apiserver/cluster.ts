/**
 * The emulated control plane: typed reads and writes over the {@link ObjectStore} with the real
 * apiserver's bookkeeping — uid, creationTimestamp, generation, resourceVersion preconditions,
 * status subresources, finalizers and `deletionTimestamp`, pod graceful deletion, namespace
 * checks, CRD registration and schema validation, managedFields. HTTP concerns live in
 * `router.ts`; patch decoding in `patch_request.ts`; cascading deletion in `gc.ts`.
 *
 * @module
 */
import { recordUpdate } from "./apply.ts";
import {
  checkMicroTimes,
  defaultOnCreate,
  foldSecretStringData,
  validateBuiltin,
  validateName,
} from "./admission.ts";
import { eventToCore, eventToEventsV1 } from "./event_convert.ts";
import type { ListKeyFn } from "./field_set.ts";
import { kubeTime } from "../../../src/kube/time.ts";
import { crdListKeys, establishCrd } from "./crd_support.ts";
import { deleteObject, type DeleteOptions, type DeleteResult } from "./deletion.ts";
import { GarbageCollector } from "./gc.ts";
import { clone, deepEqual, isObject, type JsonObject, meta } from "./json_value.ts";
import { ObjectStore } from "./object_store.ts";
import { isSetList, mergeKeyFor } from "./patch_strategic.ts";
import {
  groupVersion,
  ResourceRegistry,
  type ResourceType,
  storageKey,
  typeFromCrd,
} from "./resources.ts";
import { validateCustomResource } from "./schema_validate.ts";
import {
  alreadyExists,
  ApiError,
  badRequest,
  conflict,
  forbidden,
  invalid,
  notFound,
  type StatusCause,
} from "./status_errors.ts";

/** Namespaces that exist from the start. */
export const INITIAL_NAMESPACES: readonly string[] = [
  "default",
  "kube-system",
  "kube-public",
  "kube-node-lease",
];

const GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

/** Options for {@link Cluster}. */
export interface ClusterOptions {
  /**
   * How long a gracefully deleted, bound pod stays Terminating before the emulator removes it
   * itself. Undefined = never: a kubelet (emulator) must confirm with a delete at grace 0.
   */
  readonly podTerminationMs?: number;
  /** Reject Lease/Event MicroTime values without 6 fractional digits. @default true */
  readonly strictMicroTime?: boolean;
  /** Watch history length. @default 10000 */
  readonly historySize?: number;
}

/** Per-request write settings. */
export interface WriteOptions {
  /** Field manager for managedFields. */
  readonly manager: string;
  /** `dryRun=All`: compute the result without storing it. */
  readonly dryRun?: boolean;
  /** `Strict`, `Warn` (default) or `Ignore`. */
  readonly fieldValidation?: string;
  /** Collects `Warning` header texts. */
  readonly warnings?: string[];
}

/** Result of a write: the object and whether it was created. */
export interface WriteResult {
  /** The object as the client should see it. */
  readonly object: JsonObject;
  /** True when the write created the object (HTTP 201). */
  readonly created: boolean;
}

export type { DeleteOptions, DeleteResult };

function specOf(o: JsonObject): JsonObject {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = o;
  return rest;
}

/** The emulated cluster state and its write rules. */
export class Cluster {
  /** Object storage. */
  readonly store: ObjectStore;
  /** Served types. */
  readonly registry: ResourceRegistry = new ResourceRegistry();
  #options: ClusterOptions;
  #gc: GarbageCollector;
  #timers = new Set<ReturnType<typeof setTimeout>>();

  /** Create a cluster with the initial namespaces. */
  constructor(options: ClusterOptions = {}) {
    this.#options = options;
    this.store = new ObjectStore(options.historySize ? { historySize: options.historySize } : {});
    this.#gc = new GarbageCollector(this);
    const ns = this.registry.find("", "v1", "namespaces")!;
    for (const name of INITIAL_NAMESPACES) {
      this.create(ns, "", { apiVersion: "v1", kind: "Namespace", metadata: { name } }, {
        manager: "emulator",
      });
    }
  }

  /** Stop timers (pod termination, GC). */
  stop(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#gc.stop();
  }

  /** Run `fn` after `ms`, cancelled by {@link stop}. */
  later(ms: number, fn: () => void): void {
    const id = setTimeout(() => {
      this.#timers.delete(id);
      fn();
    }, ms);
    this.#timers.add(id);
  }

  /** List-map keys for server-side apply of type `t`. */
  listKeys(t: ResourceType): ListKeyFn {
    if (t.custom) return (names) => crdListKeys(t.schema, names);
    return (names) => {
      const last = names[names.length - 1] ?? "";
      if (isSetList(last)) return [];
      const k = mergeKeyFor(last);
      return k ? [k] : undefined;
    };
  }

  /** The object as returned to clients of `t` (kind/apiVersion set, events converted). */
  present(t: ResourceType, obj: JsonObject): JsonObject {
    const o = t.group === "events.k8s.io" ? eventToEventsV1(obj) : obj;
    const { apiVersion: _a, kind: _k, ...rest } = o;
    return { apiVersion: groupVersion(t), kind: t.kind, ...rest };
  }

  #ref(t: ResourceType, name: string) {
    return { resource: t.plural, group: t.group, name };
  }

  /** Get one object or throw 404. */
  get(t: ResourceType, ns: string, name: string): JsonObject {
    const o = this.store.get(storageKey(t), t.namespaced ? ns : "", name);
    if (!o) throw notFound(this.#ref(t, name));
    return this.present(t, o);
  }

  /**
   * The Priority admission plugin: a pod naming a PriorityClass that does not exist is refused
   * (the built-in `system-*` classes always exist).
   */
  #checkPriorityClass(pod: JsonObject, name: string): void {
    const pc = (isObject(pod.spec) ? pod.spec : {}).priorityClassName;
    if (typeof pc !== "string" || pc === "" || pc.startsWith("system-")) return;
    if (!this.store.get("scheduling.k8s.io/priorityclasses", "", pc)) {
      throw forbidden(`pods "${name}" is forbidden: no PriorityClass with name ${pc} was found`, {
        name,
        kind: "pods",
      });
    }
  }

  #checkNamespace(t: ResourceType, ns: string, name: string): void {
    if (!t.namespaced) return;
    const n = this.store.get("/namespaces", "", ns);
    if (!n) {
      throw new ApiError(404, "NotFound", `namespaces "${ns}" not found`, {
        name: ns,
        kind: "namespaces",
      });
    }
    if (meta(n).deletionTimestamp) {
      throw forbidden(
        `${t.plural} "${name}" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`,
        {
          name,
          kind: t.plural,
          causes: [{
            reason: "NamespaceTerminating",
            message: `namespace ${ns} is being terminated`,
            field: "metadata.namespace",
          }],
        },
      );
    }
  }

  #normalizeBody(t: ResourceType, ns: string, body: unknown): JsonObject {
    if (!isObject(body)) throw badRequest("the body of the request was in an unknown format");
    let obj = clone(body);
    if (t.group === "events.k8s.io") obj = eventToCore(obj);
    const m = meta(obj);
    if (t.namespaced) {
      if (m.namespace && m.namespace !== ns) {
        throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      m.namespace = ns;
    } else delete m.namespace;
    delete obj.apiVersion;
    delete obj.kind;
    return obj;
  }

  /** Validate and prune; returns the object to store. */
  #admit(
    t: ResourceType,
    obj: JsonObject,
    old: JsonObject | undefined,
    w: WriteOptions,
  ): JsonObject {
    if (this.#options.strictMicroTime !== false) checkMicroTimes(t, obj);
    if (t.group === "" && t.kind === "Secret") foldSecretStringData(obj);
    const name = String(meta(obj).name ?? "");
    const causes: StatusCause[] = old ? [] : validateName(t, name);
    let out = obj;
    if (t.custom) {
      const r = validateCustomResource(this.present(t, obj), t.schema);
      causes.push(...r.causes);
      if (r.unknownFields.length) {
        if (w.fieldValidation === "Strict") {
          throw badRequest(
            `${t.kind} in version "${t.version}" cannot be handled as a ${t.kind}: strict decoding error: ${
              r.unknownFields.map((f) => `unknown field "${f}"`).join(", ")
            }`,
          );
        }
        if (w.fieldValidation !== "Ignore") {
          w.warnings?.push(...r.unknownFields.map((f) => `unknown field "${f}"`));
        }
      }
      out = r.value;
      delete out.apiVersion;
      delete out.kind;
    } else {
      causes.push(...validateBuiltin(t, obj, old));
    }
    const oldFin = old ? (meta(old).finalizers ?? []) as string[] : [];
    const newFin = (meta(out).finalizers ?? []) as string[];
    if (old && meta(old).deletionTimestamp && newFin.some((f) => !oldFin.includes(f))) {
      const added = newFin.filter((f) => !oldFin.includes(f));
      causes.push({
        reason: "FieldValueForbidden",
        message:
          `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${
            added.map((f) => JSON.stringify(f)).join(", ")
          }}`,
        field: "metadata.finalizers",
      });
    }
    if (causes.length) throw invalid(t.kind, t.group, name, causes);
    return out;
  }

  /**
   * Create an object (POST). `body.metadata.generateName` is honoured. With `track=false` the
   * body's managedFields are kept (server-side apply computed them).
   */
  create(t: ResourceType, ns: string, body: unknown, w: WriteOptions, track = true): JsonObject {
    const obj = this.#normalizeBody(t, ns, body);
    if (track) delete meta(obj).managedFields;
    return this.#createNormalized(t, ns, obj, w, track);
  }

  #createNormalized(
    t: ResourceType,
    ns: string,
    obj: JsonObject,
    w: WriteOptions,
    track: boolean,
  ): JsonObject {
    const m = meta(obj);
    const sk = storageKey(t);
    const nsKey = t.namespaced ? ns : "";
    if (!m.name && m.generateName) {
      for (let i = 0; i < 8; i++) {
        let name = String(m.generateName).slice(0, 58);
        for (let j = 0; j < 5; j++) {
          name += GENERATE_ALPHABET[Math.floor(Math.random() * GENERATE_ALPHABET.length)];
        }
        if (!this.store.get(sk, nsKey, name)) {
          m.name = name;
          break;
        }
      }
    }
    if (!m.name) {
      throw invalid(t.kind, t.group, "", [{
        reason: "FieldValueRequired",
        message: "Required value: name or generateName is required",
        field: "metadata.name",
      }]);
    }
    const name = String(m.name);
    this.#checkNamespace(t, ns, name);
    if (t.group === "" && t.kind === "Pod") this.#checkPriorityClass(obj, name);
    if (this.store.get(sk, nsKey, name)) throw alreadyExists(this.#ref(t, name));
    m.uid = crypto.randomUUID();
    m.creationTimestamp = kubeTime();
    delete m.resourceVersion;
    delete m.deletionTimestamp;
    delete m.deletionGracePeriodSeconds;
    if (t.generation) m.generation = 1;
    else delete m.generation;
    if (t.statusSubresource) delete obj.status;
    defaultOnCreate(t, obj);
    let stored = this.#admit(t, obj, undefined, w);
    if (t.kind === "CustomResourceDefinition") stored = establishCrd(stored);
    if (track) recordUpdate(undefined, stored, this.#mfOptions(t, w.manager));
    if (w.dryRun) return this.present(t, stored);
    const out = this.store.create(sk, stored);
    if (t.kind === "CustomResourceDefinition") this.#registerCrd(out);
    if (meta(out).ownerReferences) this.#gc.schedule();
    return this.present(t, out);
  }

  #mfOptions(t: ResourceType, manager: string, subresource?: string) {
    return {
      manager,
      apiVersion: groupVersion(t),
      now: kubeTime(),
      listKeys: this.listKeys(t),
      ...(subresource ? { subresource } : {}),
    };
  }

  #registerCrd(crd: JsonObject): void {
    const rt = typeFromCrd(crd);
    if (rt) this.registry.register(rt);
  }

  /**
   * Replace an object (PUT). With `subresource` `status`, only `.status` is taken from `body`.
   * A stale `metadata.resourceVersion` in the body is a 409.
   */
  update(
    t: ResourceType,
    ns: string,
    name: string,
    body: unknown,
    w: WriteOptions,
    subresource?: string,
  ): WriteResult {
    const obj = this.#normalizeBody(t, ns, body);
    const m = meta(obj);
    if (m.name !== undefined && m.name !== name) {
      throw badRequest(
        `the name of the object (${m.name}) does not match the name on the URL (${name})`,
      );
    }
    m.name = name;
    const current = this.store.get(storageKey(t), t.namespaced ? ns : "", name);
    if (!current) {
      if (t.createOnUpdate && !subresource) {
        return { object: this.#createNormalized(t, ns, obj, w, true), created: true };
      }
      throw notFound(this.#ref(t, name));
    }
    return {
      object: this.commit(t, current, obj, w, { subresource, track: true }),
      created: false,
    };
  }

  /**
   * Write `next` over `current` with the real server's rules (system fields restored, status
   * subresource, preconditions, generation, no-op detection, finalizer completion).
   * `track=false` means managedFields were already computed (server-side apply).
   */
  commit(
    t: ResourceType,
    current: JsonObject,
    proposed: JsonObject,
    w: WriteOptions,
    opts: { subresource?: string | undefined; track: boolean },
  ): JsonObject {
    const cm = meta(current);
    const name = String(cm.name);
    const pm = meta(proposed);
    if (
      pm.resourceVersion !== undefined && pm.resourceVersion !== "" &&
      pm.resourceVersion !== cm.resourceVersion
    ) {
      throw conflict(this.#ref(t, name));
    }
    if (pm.uid !== undefined && pm.uid !== "" && pm.uid !== cm.uid) {
      throw conflict(
        this.#ref(t, name),
        `Precondition failed: UID in precondition: ${pm.uid}, UID in object meta: ${cm.uid}`,
      );
    }
    let next: JsonObject;
    if (opts.subresource === "status") {
      next = { ...clone(current), status: proposed.status };
      if (pm.managedFields !== undefined) meta(next).managedFields = pm.managedFields;
    } else {
      next = clone(proposed);
      if (t.statusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = clone(current.status);
      }
    }
    const nm = meta(next);
    for (
      const k of [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "name",
      ]
    ) {
      if (cm[k] === undefined) delete nm[k];
      else nm[k] = cm[k];
    }
    nm.resourceVersion = cm.resourceVersion;
    next = this.#admit(t, next, current, w);
    const nm2 = meta(next);
    if (opts.track) recordUpdate(current, next, this.#mfOptions(t, w.manager, opts.subresource));
    if (t.generation) {
      nm2.generation = Number(cm.generation ?? 1) +
        (deepEqual(specOf(current), specOf(next)) ? 0 : 1);
    }
    if (deepEqual(next, current)) return this.present(t, current);
    if (w.dryRun) return this.present(t, next);
    const stored = this.store.update(storageKey(t), next);
    if (t.kind === "CustomResourceDefinition") this.#registerCrd(stored);
    if (
      nm2.deletionTimestamp && !((nm2.finalizers ?? []) as unknown[]).length &&
      !this.#waitsForKubelet(t, stored)
    ) {
      this.removeNow(t, stored);
    }
    if (nm2.deletionTimestamp || nm2.ownerReferences || cm.ownerReferences) this.#gc.schedule();
    return this.present(t, stored);
  }

  /**
   * A terminating pod with a grace period waits for the kubelet: a grace-0 DELETE, or (emulator
   * shortcut) a status saying the pod finished (`Succeeded`/`Failed`).
   */
  #waitsForKubelet(t: ResourceType, obj: JsonObject): boolean {
    if (t.kind !== "Pod" || t.group !== "") return false;
    const phase = (obj.status as JsonObject | undefined)?.phase;
    if (phase === "Succeeded" || phase === "Failed") return false;
    return Number(meta(obj).deletionGracePeriodSeconds ?? 0) > 0;
  }

  /** Remove an object now (no finalizer checks); unregisters deleted CRDs' types. */
  removeNow(t: ResourceType, obj: JsonObject): JsonObject | undefined {
    const m = meta(obj);
    const gone = this.store.remove(storageKey(t), String(m.namespace ?? ""), String(m.name));
    if (gone && t.kind === "CustomResourceDefinition") {
      const spec = (obj.spec ?? {}) as JsonObject;
      const names = (spec.names ?? {}) as JsonObject;
      this.registry.unregister(String(spec.group), String(names.plural));
    }
    this.#gc.schedule();
    return gone;
  }

  /**
   * Delete an object. Objects with finalizers (and bound pods with a grace period) are only
   * marked with `deletionTimestamp`; everything else is removed and dependents are collected.
   */
  delete(t: ResourceType, ns: string, name: string, opts: DeleteOptions = {}): DeleteResult {
    return deleteObject(this, t, ns, name, opts);
  }

  /** See {@link ClusterOptions.podTerminationMs}. */
  get podTerminationMs(): number | undefined {
    return this.#options.podTerminationMs;
  }

  /** Request a garbage-collection sweep soon. */
  scheduleGc(): void {
    this.#gc.schedule();
  }

  /** Remove the object right away if it is marked for deletion and nothing holds it. */
  finalizeIfReady(t: ResourceType, obj: JsonObject): void {
    const m = meta(obj);
    if (
      m.deletionTimestamp && !((m.finalizers ?? []) as unknown[]).length &&
      !this.#waitsForKubelet(t, obj)
    ) {
      this.removeNow(t, obj);
    }
  }

  /** Resource type of a storage key (first registered alias). */
  typeOfStorageKey(sk: string): ResourceType | undefined {
    return this.registry.all().find((t) => storageKey(t) === sk);
  }
}
