/**
 * {@link KubeClient} over the Kubernetes REST API, sent with undici. Connection settings come from
 * a {@link KubeClientConfig} (our own kubeconfig loader); a client-node `KubeConfig` is accepted
 * too and converted, for tests that already have one.
 *
 * One connection pool is reused for every call; a token file is re-read every
 * {@link AUTH_REFRESH_MS} so rotated service-account tokens are picked up.
 *
 * @module
 */
import { readFile } from "node:fs/promises";
import { Agent, fetch } from "undici";
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
import { apiErrorFrom, GoneError } from "./errors.ts";
import type { KubeClientConfig } from "./kube_config.ts";
import { apiVersionOf, collectionPath, itemPath, type Resource } from "./resources.ts";

/** A watch that delivers no byte for this long is re-opened (the server sends bookmarks more often). */
export const WATCH_INACTIVITY_MS = 30_000;

/** How many times a 429 (Too Many Requests) answer is retried after its Retry-After. */
export const MAX_TOO_MANY_REQUESTS_RETRIES = 5;

/** How often a token file is re-read. */
export const AUTH_REFRESH_MS = 60_000;

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
  strategic: "application/strategic-merge-patch+json",
  apply: "application/apply-patch+yaml",
};

/** The parts of a client-node `KubeConfig` we can convert (structural: client-node is not imported). */
export interface ClientNodeKubeConfigLike {
  getCurrentCluster():
    | { server: string; caData?: string; caFile?: string; skipTLSVerify?: boolean }
    | null;
  getCurrentUser(): {
    token?: string;
    certData?: string;
    keyData?: string;
    username?: string;
    password?: string;
  } | null;
}

function fromClientNode(kc: ClientNodeKubeConfigLike): KubeClientConfig {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("Kubeconfig has no current cluster");
  const user = kc.getCurrentUser() ?? {};
  const decode = (b64?: string) => (b64 ? atob(b64) : undefined);
  const ca = decode(cluster.caData);
  const cert = decode(user.certData);
  const key = decode(user.keyData);
  return {
    server: cluster.server.replace(/\/+$/, ""),
    ...(ca ? { ca } : {}),
    ...(cluster.skipTLSVerify ? { insecureSkipTLSVerify: true } : {}),
    ...(user.token ? { token: user.token } : {}),
    ...(cert && key ? { cert, key } : {}),
    ...(user.username ? { username: user.username, password: user.password ?? "" } : {}),
  };
}

/** True for a network-level failure (no HTTP response), which may be retried. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof TypeError)) return false;
  const cause = (err as { cause?: { code?: string; name?: string } }).cause;
  const code = cause?.code ?? "";
  return /^(UND_ERR_SOCKET|UND_ERR_CLOSED|ECONNRESET|ECONNREFUSED|EPIPE|UND_ERR_CONNECT_TIMEOUT)$/
    .test(code) ||
    cause?.name === "SocketError";
}

/** Counts of requests by verb, for metrics and benchmarks. */
export type RequestCounts = Record<string, number>;

/** A {@link KubeClient} talking to a real API server. */
export class RestKubeClient implements KubeClient {
  readonly #config: KubeClientConfig;
  readonly #server: string;
  readonly #userAgent: string;
  readonly #dispatcher: Agent;
  #token: { value: string | undefined; at: number } | undefined;
  /** Requests sent, by verb (GET, LIST, WATCH, POST, PUT, PATCH, DELETE). */
  readonly counts: RequestCounts = {};

  /** Create a client for `config`. */
  constructor(
    config: KubeClientConfig | ClientNodeKubeConfigLike,
    options: { userAgent?: string } = {},
  ) {
    this.#config = "getCurrentCluster" in config ? fromClientNode(config) : config;
    this.#server = this.#config.server.replace(/\/+$/, "");
    this.#userAgent = options.userAgent ?? "s3-csi";
    this.#dispatcher = new Agent({
      connect: {
        ...(this.#config.ca ? { ca: this.#config.ca } : {}),
        ...(this.#config.cert ? { cert: this.#config.cert, key: this.#config.key } : {}),
        rejectUnauthorized: !this.#config.insecureSkipTLSVerify,
      },
      keepAliveTimeout: 30_000,
      connections: 32,
      // HTTP/1.1 only: undici speaks HTTP/2 through Deno's node:http2, whose nghttp2 binding can
      // abort the whole process when the server sends GOAWAY (kube-apiserver does: idle
      // connections, --goaway-chance, restarts). See ADR 0008.
      allowH2: false,
    });
  }

  async #authorization(): Promise<string | undefined> {
    const c = this.#config;
    if (c.tokenFile) {
      if (!this.#token || Date.now() - this.#token.at > AUTH_REFRESH_MS) {
        const value = (await readFile(c.tokenFile, "utf8")).trim();
        this.#token = { value, at: Date.now() };
      }
      return `Bearer ${this.#token.value}`;
    }
    if (c.token) return `Bearer ${c.token}`;
    if (c.username !== undefined) return `Basic ${btoa(`${c.username}:${c.password ?? ""}`)}`;
    return undefined;
  }

  /** Close the connection pool. */
  async close(): Promise<void> {
    await this.#dispatcher.close();
  }

  async #request(
    verb: string,
    method: string,
    path: string,
    opts: {
      query?: Record<string, string | undefined>;
      body?: unknown;
      contentType?: string;
      signal?: AbortSignal | undefined;
    },
  ) {
    const authorization = await this.#authorization();
    const url = new URL(this.#server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, v);
    }
    this.counts[verb] = (this.counts[verb] ?? 0) + 1;
    const headers: Record<string, string> = {
      accept: "application/json",
      "user-agent": this.#userAgent,
    };
    if (authorization) headers.authorization = authorization;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers["content-type"] = opts.contentType ?? "application/json";
      body = JSON.stringify(opts.body);
    }
    const send = () =>
      fetch(url, {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        dispatcher: this.#dispatcher,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    let response;
    try {
      response = await send();
    } catch (err) {
      // A pooled keep-alive connection the server closed (restart, idle timeout) fails before any
      // response: retry once on a fresh connection. Writes are safe to repeat here because
      // callers use resourceVersions and deterministic names (AlreadyExists/Conflict are handled).
      if (opts.signal?.aborted || !isConnectionError(err)) throw err;
      await new Promise((r) => setTimeout(r, 200));
      response = await send();
    }
    // 429: the server asks to come back later (API priority and fairness, or a watch cache that
    // is still initializing, e.g. right after a CRD was created or the server restarted).
    for (
      let attempt = 0;
      response.status === 429 && attempt < MAX_TOO_MANY_REQUESTS_RETRIES;
      attempt++
    ) {
      const after = Number(response.headers.get("retry-after") ?? "1");
      await response.body?.cancel();
      const waitMs = Math.min(Number.isFinite(after) && after > 0 ? after * 1000 : 1000, 5000);
      await new Promise((r) => setTimeout(r, waitMs));
      if (opts.signal?.aborted) break;
      response = await send();
    }
    return response;
  }

  async #json<T>(what: string, response: Awaited<ReturnType<typeof fetch>>): Promise<T> {
    const text = await response.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = { message: text.slice(0, 300) };
    }
    if (!response.ok) throw apiErrorFrom(response.status, body, what);
    return body as T;
  }

  /** @inheritdoc */
  async get<T extends KubeObject>(
    r: Resource,
    name: string,
    namespace?: string,
    opts: CallOptions = {},
  ): Promise<T | undefined> {
    const res = await this.#request("GET", "GET", itemPath(r, name, namespace), {
      signal: opts.signal,
    });
    if (res.status === 404) {
      await res.body?.cancel();
      return undefined;
    }
    return await this.#json<T>(`get ${r.kind} ${name}`, res);
  }

  /** @inheritdoc */
  async list<T extends KubeObject>(
    r: Resource,
    opts: ListOptions & CallOptions = {},
  ): Promise<ListResult<T>> {
    const items: T[] = [];
    let cont: string | undefined;
    let resourceVersion = "";
    do {
      const res = await this.#request("LIST", "GET", collectionPath(r, opts.namespace), {
        query: {
          labelSelector: opts.labelSelector,
          fieldSelector: opts.fieldSelector,
          limit: opts.limit ? String(opts.limit) : undefined,
          continue: cont,
        },
        signal: opts.signal,
      });
      const page = await this.#json<
        { items?: T[]; metadata?: { resourceVersion?: string; continue?: string } }
      >(
        `list ${r.plural}`,
        res,
      );
      for (const item of page.items ?? []) {
        item.apiVersion ??= apiVersionOf(r);
        item.kind ??= r.kind;
        items.push(item);
      }
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      cont = page.metadata?.continue || undefined;
    } while (cont);
    return { items, resourceVersion };
  }

  /** @inheritdoc */
  async create<T extends KubeObject>(
    r: Resource,
    obj: T,
    opts: CallOptions & { fieldManager?: string } = {},
  ): Promise<T> {
    const body = { apiVersion: apiVersionOf(r), kind: r.kind, ...obj };
    const res = await this.#request("POST", "POST", collectionPath(r, obj.metadata?.namespace), {
      body,
      query: { fieldManager: opts.fieldManager },
      signal: opts.signal,
    });
    return await this.#json<T>(
      `create ${r.kind} ${obj.metadata?.name ?? obj.metadata?.generateName ?? ""}`,
      res,
    );
  }

  /** @inheritdoc */
  async update<T extends KubeObject>(
    r: Resource,
    obj: T,
    opts: CallOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    const name = obj.metadata?.name ?? "";
    const res = await this.#request(
      "PUT",
      "PUT",
      itemPath(r, name, obj.metadata?.namespace, opts.subresource),
      {
        body: { apiVersion: apiVersionOf(r), kind: r.kind, ...obj },
        signal: opts.signal,
      },
    );
    return await this.#json<T>(`update ${r.kind} ${name}`, res);
  }

  /** @inheritdoc */
  async patch<T extends KubeObject>(
    r: Resource,
    name: string,
    namespace: string | undefined,
    patch: unknown,
    opts: CallOptions & {
      type?: PatchType;
      fieldManager?: string;
      force?: boolean;
      subresource?: "status";
    } = {},
  ): Promise<T> {
    const type = opts.type ?? "merge";
    const res = await this.#request(
      "PATCH",
      "PATCH",
      itemPath(r, name, namespace, opts.subresource),
      {
        body: patch,
        contentType: PATCH_CONTENT_TYPES[type],
        query: {
          fieldManager: opts.fieldManager,
          force: opts.force === undefined ? undefined : String(opts.force),
        },
        signal: opts.signal,
      },
    );
    return await this.#json<T>(`patch ${r.kind} ${name}`, res);
  }

  /** @inheritdoc */
  async delete(
    r: Resource,
    name: string,
    namespace?: string,
    opts: CallOptions & DeleteOptions = {},
  ): Promise<boolean> {
    const body: Record<string, unknown> = { kind: "DeleteOptions", apiVersion: "v1" };
    if (opts.preconditions) body.preconditions = opts.preconditions;
    if (opts.gracePeriodSeconds !== undefined) body.gracePeriodSeconds = opts.gracePeriodSeconds;
    if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
    const res = await this.#request("DELETE", "DELETE", itemPath(r, name, namespace), {
      body,
      signal: opts.signal,
    });
    if (res.status === 404) {
      await res.body?.cancel();
      return false;
    }
    await this.#json(`delete ${r.kind} ${name}`, res);
    return true;
  }

  /** @inheritdoc */
  async watch<T extends KubeObject>(
    r: Resource,
    opts: ListOptions & CallOptions & {
      resourceVersion: string;
      timeoutSeconds?: number;
      inactivityMs?: number;
    },
    onEvent: (event: WatchEvent<T>) => void,
  ): Promise<void> {
    const res = await this.#request("WATCH", "GET", collectionPath(r, opts.namespace), {
      query: {
        watch: "true",
        resourceVersion: opts.resourceVersion || undefined,
        allowWatchBookmarks: "true",
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
        timeoutSeconds: String(opts.timeoutSeconds ?? 300),
      },
      signal: opts.signal,
    }).catch((err) => {
      if (opts.signal?.aborted) return undefined;
      throw err;
    });
    if (!res) return;
    if (!res.ok) {
      await this.#json(`watch ${r.plural}`, res);
      return;
    }
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    // undici does not end a body that is being read when the request's signal aborts: cancel the
    // reader ourselves so an aborted watch returns at once.
    const reader = res.body.getReader();
    const cancel = () => void reader.cancel().catch(() => {});
    opts.signal?.addEventListener("abort", cancel, { once: true });
    // A connection the server side lost (crash, network cut) does not always end the body under
    // Deno's node compatibility layer: give up after WATCH_INACTIVITY_MS without a byte and let
    // the caller watch again from its last resourceVersion (client-node does the same).
    let idle: ReturnType<typeof setTimeout> | undefined;
    const resetIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(cancel, opts.inactivityMs ?? WATCH_INACTIVITY_MS);
    };
    resetIdle();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        resetIdle();
        buffer += decoder.decode(value as Uint8Array, { stream: true });
        let nl: number;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const event = JSON.parse(line) as WatchEvent<T>;
          if (event.type === "ERROR") {
            const status = event.object as unknown as {
              code?: number;
              reason?: string;
              message?: string;
            };
            if (status.code === 410) {
              throw new GoneError(
                410,
                status.reason ?? "Expired",
                status.message ?? "too old resource version",
              );
            }
            throw apiErrorFrom(status.code ?? 500, status, `watch ${r.plural}`);
          }
          onEvent(event);
        }
      }
    } catch (err) {
      if (opts.signal?.aborted) return;
      throw err;
    } finally {
      clearTimeout(idle);
      opts.signal?.removeEventListener("abort", cancel);
      cancel();
    }
  }
}
