/**
 * In-memory {@link KubeClient} for unit tests: resourceVersions, optimistic concurrency,
 * generateName, uid/creationTimestamp, label and field selectors (equality), JSON merge patch,
 * watches with history (410 for versions older than the history), and injectable failures.
 *
 * @module
 */
import type {
  CallOptions,
  DeleteOptions,
  KubeClient,
  KubeObject,
  ListOptions,
  ListResult,
  PatchType,
  WatchEvent,
} from "./client.ts";
import { objectKey } from "./client.ts";
import { AlreadyExistsError, ApiError, ConflictError, GoneError, NotFoundError } from "./errors.ts";
import { apiVersionOf, type Resource } from "./resources.ts";
import { kubeTime } from "./time.ts";

type Listener = (event: WatchEvent<KubeObject>) => void;

interface Stored {
  readonly resource: Resource;
  readonly obj: KubeObject;
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target && typeof target === "object" && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Value at a dotted path such as `spec.nodeName`. */
export function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const part of path.split(".")) cur = (cur as Record<string, unknown> | undefined)?.[part];
  return cur === undefined || cur === null ? "" : String(cur);
}

function matches(obj: KubeObject, opts: ListOptions): boolean {
  if (opts.namespace && obj.metadata?.namespace !== opts.namespace) return false;
  for (const term of (opts.fieldSelector ?? "").split(",").filter(Boolean)) {
    const [path, value] = term.includes("!=") ? term.split("!=") : term.split(/==?/);
    const actual = fieldValue(obj, path!);
    if (term.includes("!=") ? actual === value : actual !== value) return false;
  }
  for (const term of (opts.labelSelector ?? "").split(",").filter(Boolean)) {
    const labels = obj.metadata?.labels ?? {};
    if (term.includes("!=")) {
      const [k, v] = term.split("!=");
      if (labels[k!] === v) return false;
    } else if (term.includes("=")) {
      const [k, v] = term.split(/==?/);
      if (labels[k!] !== v) return false;
    } else if (term.startsWith("!")) {
      if (term.slice(1) in labels) return false;
    } else if (!(term in labels)) return false;
  }
  return true;
}

/** The in-memory fake. */
export class FakeKubeClient implements KubeClient {
  readonly #objects = new Map<string, Stored>();
  readonly #history: { rv: number; resource: Resource; event: WatchEvent<KubeObject> }[] = [];
  readonly #listeners = new Set<{ resource: Resource; opts: ListOptions; fn: Listener }>();
  #rv = 1;
  #uid = 0;
  /** Writes by verb, for assertions on API traffic. */
  readonly writes: Record<string, number> = {};
  /** Return an error to fail the next matching call (`verb` is create/update/patch/delete/get/list). */
  failNext: ((verb: string, resource: Resource, name: string) => Error | undefined) | undefined;
  /** Events kept for resuming watches. */
  historyLimit = 10_000;

  #key(r: Resource, name: string, namespace?: string): string {
    return `${r.group}/${r.plural}/${r.namespaced ? `${namespace}/` : ""}${name}`;
  }

  #fail(verb: string, r: Resource, name: string): void {
    const err = this.failNext?.(verb, r, name);
    if (err) throw err;
  }

  #count(verb: string): void {
    this.writes[verb] = (this.writes[verb] ?? 0) + 1;
  }

  #emit(resource: Resource, type: WatchEvent<KubeObject>["type"], obj: KubeObject): void {
    const event = { type, object: structuredClone(obj) };
    this.#history.push({ rv: Number(obj.metadata?.resourceVersion), resource, event });
    if (this.#history.length > this.historyLimit) this.#history.shift();
    for (const l of this.#listeners) {
      if (l.resource === resource && matches(obj, l.opts)) l.fn(structuredClone(event));
    }
  }

  /** Objects of a resource (test inspection). */
  objects<T extends KubeObject>(r: Resource): T[] {
    return [...this.#objects.values()].filter((s) => s.resource === r).map((s) =>
      structuredClone(s.obj) as T
    );
  }

  /** Drop all open watches as a server restart would. */
  closeWatches(): void {
    for (const l of this.#listeners) {
      l.fn({ type: "BOOKMARK", object: { metadata: { resourceVersion: "__close__" } } });
    }
  }

  /** @inheritdoc */
  get<T extends KubeObject>(r: Resource, name: string, namespace?: string): Promise<T | undefined> {
    this.#fail("get", r, name);
    const s = this.#objects.get(this.#key(r, name, namespace));
    return Promise.resolve(s ? structuredClone(s.obj) as T : undefined);
  }

  /** @inheritdoc */
  list<T extends KubeObject>(
    r: Resource,
    opts: ListOptions & CallOptions = {},
  ): Promise<ListResult<T>> {
    this.#fail("list", r, "");
    const items = this.objects<T>(r).filter((o) => matches(o, opts));
    return Promise.resolve({ items, resourceVersion: String(this.#rv) });
  }

  /** @inheritdoc */
  create<T extends KubeObject>(r: Resource, obj: T): Promise<T> {
    const meta = obj.metadata ?? {};
    const name = meta.name ??
      (meta.generateName ? `${meta.generateName}${(++this.#uid).toString(36)}x` : "");
    this.#fail("create", r, name);
    if (!name) return Promise.reject(new ApiError(422, "Invalid", "metadata.name: Required value"));
    const key = this.#key(r, name, meta.namespace);
    if (this.#objects.has(key)) {
      return Promise.reject(
        new AlreadyExistsError(409, "AlreadyExists", `${r.plural} "${name}" already exists`),
      );
    }
    this.#count("create");
    const stored = structuredClone(obj) as KubeObject;
    stored.apiVersion = apiVersionOf(r);
    stored.kind = r.kind;
    stored.metadata = {
      ...meta,
      name,
      uid: `uid-${++this.#uid}`,
      resourceVersion: String(++this.#rv),
      creationTimestamp: kubeTime(),
    };
    delete stored.metadata.generateName;
    this.#objects.set(key, { resource: r, obj: stored });
    this.#emit(r, "ADDED", stored);
    return Promise.resolve(structuredClone(stored) as T);
  }

  /** @inheritdoc */
  update<T extends KubeObject>(r: Resource, obj: T): Promise<T> {
    const name = obj.metadata?.name ?? "";
    this.#fail("update", r, name);
    const key = this.#key(r, name, obj.metadata?.namespace);
    const cur = this.#objects.get(key);
    if (!cur) {
      return Promise.reject(new NotFoundError(404, "NotFound", `${r.plural} "${name}" not found`));
    }
    if (
      obj.metadata?.resourceVersion &&
      obj.metadata.resourceVersion !== cur.obj.metadata?.resourceVersion
    ) {
      return Promise.reject(
        new ConflictError(
          409,
          "Conflict",
          `Operation cannot be fulfilled on ${r.plural} "${name}": the object has been modified`,
        ),
      );
    }
    return Promise.resolve(this.#replace(r, key, structuredClone(obj) as KubeObject, cur.obj) as T);
  }

  #replace(r: Resource, key: string, next: KubeObject, cur: KubeObject): KubeObject {
    this.#count("update");
    next.apiVersion = apiVersionOf(r);
    next.kind = r.kind;
    next.metadata = {
      ...next.metadata,
      uid: cur.metadata?.uid,
      creationTimestamp: cur.metadata?.creationTimestamp,
      resourceVersion: String(++this.#rv),
    };
    if (next.metadata?.deletionTimestamp && !(next.metadata.finalizers?.length)) {
      this.#objects.delete(key);
      this.#emit(r, "DELETED", next);
      return structuredClone(next);
    }
    this.#objects.set(key, { resource: r, obj: next });
    this.#emit(r, "MODIFIED", next);
    return structuredClone(next);
  }

  /** @inheritdoc */
  patch<T extends KubeObject>(
    r: Resource,
    name: string,
    namespace: string | undefined,
    patch: unknown,
    opts: { type?: PatchType } = {},
  ): Promise<T> {
    this.#fail("patch", r, name);
    if ((opts.type ?? "merge") !== "merge") {
      return Promise.reject(
        new ApiError(415, "UnsupportedMediaType", "the fake supports merge patches only"),
      );
    }
    const key = this.#key(r, name, namespace);
    const cur = this.#objects.get(key);
    if (!cur) {
      return Promise.reject(new NotFoundError(404, "NotFound", `${r.plural} "${name}" not found`));
    }
    const next = mergePatch(structuredClone(cur.obj), patch) as KubeObject;
    const wanted = (patch as KubeObject).metadata?.resourceVersion;
    if (wanted && wanted !== cur.obj.metadata?.resourceVersion) {
      return Promise.reject(
        new ConflictError(409, "Conflict", `${r.plural} "${name}" has been modified`),
      );
    }
    return Promise.resolve(this.#replace(r, key, next, cur.obj) as T);
  }

  /** @inheritdoc */
  delete(
    r: Resource,
    name: string,
    namespace?: string,
    opts: DeleteOptions = {},
  ): Promise<boolean> {
    this.#fail("delete", r, name);
    const key = this.#key(r, name, namespace);
    const cur = this.#objects.get(key);
    if (!cur) return Promise.resolve(false);
    const pre = opts.preconditions;
    if (
      (pre?.uid && pre.uid !== cur.obj.metadata?.uid) ||
      (pre?.resourceVersion && pre.resourceVersion !== cur.obj.metadata?.resourceVersion)
    ) {
      return Promise.reject(
        new ConflictError(409, "Conflict", `Precondition failed for ${r.plural} "${name}"`),
      );
    }
    this.#count("delete");
    if (cur.obj.metadata?.finalizers?.length) {
      if (!cur.obj.metadata.deletionTimestamp) {
        const next = structuredClone(cur.obj);
        next.metadata!.deletionTimestamp = kubeTime();
        this.#replace(r, key, next, cur.obj);
      }
      return Promise.resolve(true);
    }
    this.#objects.delete(key);
    this.#emit(r, "DELETED", {
      ...cur.obj,
      metadata: { ...cur.obj.metadata, resourceVersion: String(++this.#rv) },
    });
    return Promise.resolve(true);
  }

  /** @inheritdoc */
  watch<T extends KubeObject>(
    r: Resource,
    opts: ListOptions & CallOptions & { resourceVersion: string },
    onEvent: (event: WatchEvent<T>) => void,
  ): Promise<void> {
    const from = Number(opts.resourceVersion || this.#rv);
    const oldest = this.#history[0]?.rv ?? this.#rv;
    if (from < oldest - 1) {
      return Promise.reject(new GoneError(410, "Expired", "too old resource version"));
    }
    for (const h of this.#history) {
      if (h.rv > from && h.resource === r && matches(h.event.object, opts)) {
        onEvent(structuredClone(h.event) as WatchEvent<T>);
      }
    }
    return new Promise((resolve) => {
      const entry = {
        resource: r,
        opts,
        fn: (e: WatchEvent<KubeObject>) => {
          if (e.object.metadata?.resourceVersion === "__close__") return finish();
          onEvent(e as WatchEvent<T>);
        },
      };
      const finish = () => {
        this.#listeners.delete(entry);
        opts.signal?.removeEventListener("abort", finish);
        resolve();
      };
      if (opts.signal?.aborted) return resolve();
      opts.signal?.addEventListener("abort", finish, { once: true });
      this.#listeners.add(entry);
    });
  }
}

/** Key of an object as the informer stores it (re-exported for tests). */
export { objectKey };
