/**
 * {@link KubeClient} over the Kubernetes REST API, sent by {@link HttpTransport} (Deno's
 * `node:https`). Connection settings come from a {@link KubeClientConfig} (our own kubeconfig
 * loader); a client-node `KubeConfig` is accepted too and converted, for tests that already have
 * one.
 *
 * - Every request has a deadline ({@link DEFAULT_REQUEST_TIMEOUT_MS}, or `timeoutMs` per call)
 *   covering connect, headers and body: a hung connection fails the call with
 *   {@link RequestTimeoutError} instead of blocking for minutes. Watches are the exception: their
 *   deadline covers only the response headers, then an idle timeout ends a silent stream.
 * - An optional {@link WriteFence} is asked synchronously right before each write is sent: a
 *   leader whose lease is no longer valid sends nothing (leader election), and a write's deadline
 *   never extends past the lease's validity.
 * - Credentials come from the config (token, token file re-read every {@link AUTH_REFRESH_MS},
 *   client certificate, basic auth) or from a {@link CredentialSource} (exec plugins), which is
 *   asked before the deadline starts (a plugin may ask the user something) and again after a 401.
 *
 * One connection pool is reused for every call (its TLS and why it is not undici nor Deno's
 * `fetch`: `http_transport.ts`).
 *
 * @module
 */
import { readFile } from "node:fs/promises";
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
import type { Credentials } from "./credentials.ts";
import { apiErrorFrom, GoneError, NotLeaderError, RequestTimeoutError } from "./errors.ts";
import { HttpTransport, type TransportResponse } from "./http_transport.ts";
import type { KubeClientConfig } from "./kube_config.ts";
import { apiVersionOf, collectionPath, itemPath, type Resource } from "./resources.ts";

/** A watch that delivers no byte for this long is re-opened (the server sends bookmarks more often). */
export const WATCH_INACTIVITY_MS = 30_000;

/** How many times a 429 (Too Many Requests) answer is retried after its Retry-After. */
export const MAX_TOO_MANY_REQUESTS_RETRIES = 5;

/** How often a token file is re-read. */
export const AUTH_REFRESH_MS = 60_000;

/** Default deadline of one request (all verbs; for watches: until the response headers). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/**
 * Asked when a write is called and again by the transport right before its bytes are written to a
 * ready connection. `remainingMs()` is how long writes are still allowed (leader election: until
 * the lease validity ends); ≤ 0 refuses the write with {@link NotLeaderError}. A write's deadline
 * is capped at the remaining time.
 */
export interface WriteFence {
  remainingMs(): number;
}

/** How long `fence` still allows writes; throws {@link NotLeaderError} for `what` when it does not. */
function leaderTimeLeft(fence: WriteFence, what: string): number {
  const remaining = fence.remainingMs();
  if (remaining <= 0) {
    throw new NotLeaderError(`${what} refused: this process no longer holds the leader lease`);
  }
  return remaining;
}

/** Options of {@link RestKubeClient}. */
export interface RestClientOptions {
  /** `User-Agent` header. @default "s3-csi" */
  readonly userAgent?: string;
  /** Deadline of each request. @default DEFAULT_REQUEST_TIMEOUT_MS */
  readonly requestTimeoutMs?: number;
  /** Refuses writes when it says so (see {@link WriteFence}). */
  readonly fence?: WriteFence;
}

const WRITE_VERBS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** `GET /version` of an API server. */
export interface ServerVersion {
  readonly major: string;
  readonly minor: string;
  readonly gitVersion: string;
  readonly [k: string]: unknown;
}

/** Sleep `ms` unless `signal` aborts first (then throw its reason). */
async function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  await new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
  signal.throwIfAborted();
}

/** Read a response body as text, giving up when `signal` aborts. */
async function readText(response: TransportResponse, signal: AbortSignal): Promise<string> {
  if (!response.body) return "";
  signal.throwIfAborted();
  const reader = response.body.getReader();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      reject(signal.reason);
      void reader.cancel().catch(() => {});
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => {});
  const chunks: Uint8Array[] = [];
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), aborted]);
      if (done) break;
      chunks.push(value as Uint8Array);
    }
  } finally {
    signal.removeEventListener("abort", onAbort!);
  }
  // A cancelled reader reports "done": an abort must not pass for a complete (truncated) body.
  signal.throwIfAborted();
  const decoder = new TextDecoder();
  return chunks.map((c, i) => decoder.decode(c, { stream: i < chunks.length - 1 })).join("");
}

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

/** Counts of requests by verb, for metrics and benchmarks. */
export type RequestCounts = Record<string, number>;

/** A {@link KubeClient} talking to a real API server. */
export class RestKubeClient implements KubeClient {
  readonly #config: KubeClientConfig;
  readonly #server: string;
  readonly #userAgent: string;
  readonly #timeoutMs: number;
  readonly #fence: WriteFence | undefined;
  readonly #transport: HttpTransport;
  /** Client certificate the transport presents (exec credentials may change it). */
  #transportCert: string | undefined;
  #token: { value: string | undefined; at: number } | undefined;
  /** Requests sent, by verb (GET, LIST, WATCH, POST, PUT, PATCH, DELETE). */
  readonly counts: RequestCounts = {};

  /** Create a client for `config`. */
  constructor(
    config: KubeClientConfig | ClientNodeKubeConfigLike,
    options: RestClientOptions = {},
  ) {
    this.#config = "getCurrentCluster" in config ? fromClientNode(config) : config;
    this.#server = this.#config.server.replace(/\/+$/, "");
    this.#userAgent = options.userAgent ?? "s3-csi";
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#fence = options.fence;
    this.#transportCert = this.#config.cert;
    this.#transport = new HttpTransport({
      server: this.#server,
      ca: this.#config.ca,
      cert: this.#config.cert,
      key: this.#config.key,
      insecureSkipTLSVerify: this.#config.insecureSkipTLSVerify,
      tlsServerName: this.#config.tlsServerName,
    });
  }

  /** Present the client certificate of `creds` (exec plugins may issue one); swaps the pool. */
  #useCertificate(creds: Credentials): void {
    if (!creds.cert || creds.cert === this.#transportCert) return;
    this.#transport.useClientCertificate(creds.cert, creds.key);
    this.#transportCert = creds.cert;
  }

  async #authorization(
    signal: AbortSignal,
    fetched: Credentials | undefined,
  ): Promise<string | undefined> {
    const c = this.#config;
    if (c.credentials) {
      const creds = fetched ?? await c.credentials.get(signal);
      this.#useCertificate(creds);
      return creds.token ? `Bearer ${creds.token}` : undefined;
    }
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
    await this.#transport.close();
  }

  /**
   * Run one API call under a deadline: `send` issues the request(s) with the deadline's signal and
   * `read` consumes the response; both must finish before the deadline. Watches pass
   * `headersOnly` (the deadline ends once the response headers are in).
   */
  async #call<T>(
    what: string,
    opts: CallOptions & { write?: boolean; headersOnly?: boolean },
    send: (signal: AbortSignal, creds: Credentials | undefined) => Promise<TransportResponse>,
    read: (res: TransportResponse, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    // A credential plugin may ask the user something (interactiveMode): its first run is not
    // bounded by the request's deadline. Later calls are answered from its cache.
    const creds = this.#config.credentials
      ? await this.#config.credentials.get(opts.signal)
      : undefined;
    let ms = opts.timeoutMs ?? this.#timeoutMs;
    if (opts.write && this.#fence) ms = Math.min(ms, leaderTimeLeft(this.#fence, what));
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new RequestTimeoutError(what, ms)), ms);
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline.signal]) : deadline.signal;
    let headersDone = false;
    try {
      const res = await send(signal, creds);
      if (opts.headersOnly) {
        headersDone = true;
        clearTimeout(timer);
      }
      return await read(res, signal);
    } catch (err) {
      if (deadline.signal.aborted && !headersDone && !opts.signal?.aborted) {
        throw new RequestTimeoutError(what, ms, { cause: err });
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async #request(
    verb: string,
    method: string,
    path: string,
    opts: {
      query?: Record<string, string | undefined>;
      body?: unknown;
      contentType?: string;
      signal: AbortSignal;
      /** Plugin credentials fetched for this call (a 401 fetches new ones). */
      creds: Credentials | undefined;
    },
  ): Promise<TransportResponse> {
    const signal = opts.signal;
    let creds = opts.creds;
    const url = new URL(this.#server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, v);
    }
    const write = WRITE_VERBS.has(method);
    const body = opts.body !== undefined ? JSON.stringify(opts.body) : undefined;
    const send = async () => {
      const authorization = await this.#authorization(signal, creds);
      const headers: Record<string, string> = {
        accept: "application/json",
        "user-agent": this.#userAgent,
      };
      if (authorization) headers.authorization = authorization;
      if (body !== undefined) headers["content-type"] = opts.contentType ?? "application/json";
      this.counts[verb] = (this.counts[verb] ?? 0) + 1;
      // The fence is asked by the transport at the last moment, synchronously before the bytes are
      // written to a ready connection: a process stopped (SIGSTOP) and resumed after its lease
      // ended would otherwise send a write it had decided on while it still led.
      const fence = this.#fence;
      const guard = write && fence
        ? () => void leaderTimeLeft(fence, `${method} ${path}`)
        : undefined;
      return this.#transport.send(url, { method, headers, body, signal, guard });
    };
    let response;
    try {
      response = await send();
    } catch (err) {
      // A pooled keep-alive connection the server closed (restart, idle timeout) fails before any
      // response: retry once on a fresh connection. Writes are safe to repeat here because
      // callers use resourceVersions and deterministic names (AlreadyExists/Conflict are handled).
      if (signal.aborted || !this.#transport.isConnectionError(err)) throw err;
      await sleepUnlessAborted(200, signal);
      response = await send();
    }
    // 401 with a credential plugin: the credential may have expired early or been revoked; get a
    // fresh one and try once more (as client-go does for exec plugins).
    if (response.status === 401 && this.#config.credentials) {
      await response.body?.cancel();
      this.#config.credentials.invalidate();
      creds = await this.#config.credentials.get(signal);
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
      await sleepUnlessAborted(waitMs, signal);
      response = await send();
    }
    return response;
  }

  async #json<T>(what: string, response: TransportResponse, signal: AbortSignal): Promise<T> {
    const text = await readText(response, signal);
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
  get<T extends KubeObject>(
    r: Resource,
    name: string,
    namespace?: string,
    opts: CallOptions = {},
  ): Promise<T | undefined> {
    const what = `get ${r.kind} ${name}`;
    return this.#call(
      what,
      opts,
      (signal, creds) =>
        this.#request("GET", "GET", itemPath(r, name, namespace), { signal, creds }),
      async (res, signal) => {
        if (res.status === 404) {
          await res.body?.cancel();
          return undefined;
        }
        return await this.#json<T>(what, res, signal);
      },
    );
  }

  /** @inheritdoc */
  async list<T extends KubeObject>(
    r: Resource,
    opts: ListOptions & CallOptions = {},
  ): Promise<ListResult<T>> {
    const items: T[] = [];
    let cont: string | undefined;
    let resourceVersion = "";
    const what = `list ${r.plural}`;
    do {
      // Each page has its own deadline: a large list is many requests.
      const page = await this.#call(
        what,
        opts,
        (signal, creds) =>
          this.#request("LIST", "GET", collectionPath(r, opts.namespace), {
            query: {
              labelSelector: opts.labelSelector,
              fieldSelector: opts.fieldSelector,
              limit: opts.limit ? String(opts.limit) : undefined,
              continue: cont,
            },
            signal,
            creds,
          }),
        (res, signal) =>
          this.#json<
            { items?: T[]; metadata?: { resourceVersion?: string; continue?: string } }
          >(what, res, signal),
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
  create<T extends KubeObject>(
    r: Resource,
    obj: T,
    opts: CallOptions & { fieldManager?: string } = {},
  ): Promise<T> {
    const body = { apiVersion: apiVersionOf(r), kind: r.kind, ...obj };
    const what = `create ${r.kind} ${obj.metadata?.name ?? obj.metadata?.generateName ?? ""}`;
    return this.#call(
      what,
      { ...opts, write: true },
      (signal, creds) =>
        this.#request("POST", "POST", collectionPath(r, obj.metadata?.namespace), {
          body,
          query: { fieldManager: opts.fieldManager },
          signal,
          creds,
        }),
      (res, signal) => this.#json<T>(what, res, signal),
    );
  }

  /** @inheritdoc */
  update<T extends KubeObject>(
    r: Resource,
    obj: T,
    opts: CallOptions & { subresource?: "status" } = {},
  ): Promise<T> {
    const name = obj.metadata?.name ?? "";
    const what = `update ${r.kind} ${name}`;
    return this.#call(
      what,
      { ...opts, write: true },
      (signal, creds) =>
        this.#request("PUT", "PUT", itemPath(r, name, obj.metadata?.namespace, opts.subresource), {
          body: { apiVersion: apiVersionOf(r), kind: r.kind, ...obj },
          signal,
          creds,
        }),
      (res, signal) => this.#json<T>(what, res, signal),
    );
  }

  /** @inheritdoc */
  patch<T extends KubeObject>(
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
    const what = `patch ${r.kind} ${name}`;
    return this.#call(
      what,
      { ...opts, write: true },
      (signal, creds) =>
        this.#request("PATCH", "PATCH", itemPath(r, name, namespace, opts.subresource), {
          body: patch,
          contentType: PATCH_CONTENT_TYPES[type],
          query: {
            fieldManager: opts.fieldManager,
            force: opts.force === undefined ? undefined : String(opts.force),
          },
          signal,
          creds,
        }),
      (res, signal) => this.#json<T>(what, res, signal),
    );
  }

  /** @inheritdoc */
  delete(
    r: Resource,
    name: string,
    namespace?: string,
    opts: CallOptions & DeleteOptions = {},
  ): Promise<boolean> {
    const body: Record<string, unknown> = { kind: "DeleteOptions", apiVersion: "v1" };
    if (opts.preconditions) body.preconditions = opts.preconditions;
    if (opts.gracePeriodSeconds !== undefined) body.gracePeriodSeconds = opts.gracePeriodSeconds;
    if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
    const what = `delete ${r.kind} ${name}`;
    return this.#call(
      what,
      { ...opts, write: true },
      (signal, creds) =>
        this.#request("DELETE", "DELETE", itemPath(r, name, namespace), { body, signal, creds }),
      async (res, signal) => {
        if (res.status === 404) {
          await res.body?.cancel();
          return false;
        }
        await this.#json(what, res, signal);
        return true;
      },
    );
  }

  /** The server's version (`GET /version`): `major`, `minor` and `gitVersion`. */
  serverVersion(opts: CallOptions = {}): Promise<ServerVersion> {
    const what = "get server version";
    return this.#call(
      what,
      opts,
      (signal, creds) => this.#request("GET", "GET", "/version", { signal, creds }),
      (res, signal) => this.#json<ServerVersion>(what, res, signal),
    );
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
    const what = `watch ${r.plural}`;
    // The deadline covers the response headers only; the stream has an idle timeout below.
    const res = await this.#call(
      what,
      { ...opts, headersOnly: true },
      (signal, creds) =>
        this.#request("WATCH", "GET", collectionPath(r, opts.namespace), {
          query: {
            watch: "true",
            resourceVersion: opts.resourceVersion || undefined,
            allowWatchBookmarks: "true",
            labelSelector: opts.labelSelector,
            fieldSelector: opts.fieldSelector,
            timeoutSeconds: String(opts.timeoutSeconds ?? 300),
          },
          signal,
          creds,
        }),
      (res) => Promise.resolve(res),
    ).catch((err) => {
      if (opts.signal?.aborted) return undefined;
      throw err;
    });
    if (!res) return;
    if (!res.ok) {
      await this.#json(what, res, opts.signal ?? AbortSignal.timeout(this.#timeoutMs));
      return;
    }
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    // Cancel the reader ourselves when the caller aborts, so an aborted watch returns at once
    // whatever the transport does with the request's signal.
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
