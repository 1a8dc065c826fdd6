/**
 * The Kubernetes API boundary: a small interface over the REST API, implemented by
 * `rest_client.ts` (real servers: kube-apiserver or the project's emulator) and `fake_client.ts`
 * (unit tests). Nothing outside `kube/` talks HTTP to the API server.
 *
 * @module
 */
import type { Resource } from "./resources.ts";

/** Minimal object shape every resource shares. */
export interface KubeObject {
  apiVersion?: string | undefined;
  kind?: string | undefined;
  metadata?: ObjectMeta | undefined;
  [k: string]: unknown;
}

/** The parts of `metadata` this project reads or writes. */
export interface ObjectMeta {
  name?: string | undefined;
  generateName?: string | undefined;
  namespace?: string | undefined;
  uid?: string | undefined;
  resourceVersion?: string | undefined;
  creationTimestamp?: string | undefined;
  deletionTimestamp?: string | undefined;
  deletionGracePeriodSeconds?: number | undefined;
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
  finalizers?: string[] | undefined;
  ownerReferences?: unknown[] | undefined;
  [k: string]: unknown;
}

/** Options of list and watch. */
export interface ListOptions {
  /** Namespace; omit for cluster-scoped resources or all namespaces. */
  readonly namespace?: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** Page size; the client follows `continue` until the list is complete. */
  readonly limit?: number;
}

/** A complete list and the resourceVersion to watch from. */
export interface ListResult<T> {
  readonly items: T[];
  readonly resourceVersion: string;
}

/** One watch event. */
export interface WatchEvent<T> {
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  readonly object: T;
}

/** Patch content types. */
export type PatchType = "merge" | "json" | "strategic" | "apply";

/** Options of delete. */
export interface DeleteOptions {
  /** Delete only if the object still has this UID/resourceVersion. */
  readonly preconditions?: { uid?: string; resourceVersion?: string };
  readonly gracePeriodSeconds?: number;
  readonly propagationPolicy?: "Background" | "Foreground" | "Orphan";
}

/** Common options of every call. */
export interface CallOptions {
  readonly signal?: AbortSignal;
  /**
   * Deadline of this call in milliseconds (the client's default otherwise). For a watch it covers
   * only the response headers; the stream then has an idle timeout.
   */
  readonly timeoutMs?: number;
}

/** The operations this project needs from the API server. */
export interface KubeClient {
  /** GET one object; undefined when it does not exist. */
  get<T extends KubeObject>(
    r: Resource,
    name: string,
    namespace?: string,
    opts?: CallOptions,
  ): Promise<T | undefined>;
  /** LIST (all pages). */
  list<T extends KubeObject>(r: Resource, opts?: ListOptions & CallOptions): Promise<ListResult<T>>;
  /** POST. @throws {AlreadyExistsError} */
  create<T extends KubeObject>(
    r: Resource,
    obj: T,
    opts?: CallOptions & { fieldManager?: string },
  ): Promise<T>;
  /** PUT (optionally the `status` subresource). @throws {ConflictError} on a stale resourceVersion */
  update<T extends KubeObject>(
    r: Resource,
    obj: T,
    opts?: CallOptions & { subresource?: "status" },
  ): Promise<T>;
  /** PATCH. @throws {NotFoundError} */
  patch<T extends KubeObject>(
    r: Resource,
    name: string,
    namespace: string | undefined,
    patch: unknown,
    opts?: CallOptions & {
      type?: PatchType;
      fieldManager?: string;
      force?: boolean;
      subresource?: "status";
    },
  ): Promise<T>;
  /** DELETE. Resolves false when the object was already gone. @throws {ConflictError} on failed preconditions */
  delete(
    r: Resource,
    name: string,
    namespace?: string,
    opts?: CallOptions & DeleteOptions,
  ): Promise<boolean>;
  /**
   * WATCH from `resourceVersion`, calling `onEvent` for each event until the server closes the
   * stream (resolves) or `signal` aborts (resolves). @throws {GoneError} when the version is too old
   */
  watch<T extends KubeObject>(
    r: Resource,
    opts: ListOptions & CallOptions & { resourceVersion: string; timeoutSeconds?: number },
    onEvent: (event: WatchEvent<T>) => void,
  ): Promise<void>;
}

/** `namespace/name` or `name` for cluster-scoped objects: the key used by caches and queues. */
export function objectKey(obj: KubeObject): string {
  const ns = obj.metadata?.namespace;
  const name = obj.metadata?.name ?? "";
  return ns ? `${ns}/${name}` : name;
}
