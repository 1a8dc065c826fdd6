/**
 * How the REST client sends HTTP to one API server: Deno's `node:http`/`node:https` with a pool of
 * kept-alive HTTP/1.1 connections (HTTP/2 never: ADR 0008).
 *
 * TLS is Deno's Node.js TLS, as undici's was before: given the kubeconfig's CA it trusts that CA
 * only (neither the default roots nor `DENO_CERT`), as client-go does; `insecure-skip-tls-verify`
 * and `tls-server-name` work as in client-go; proxy variables are ignored (client-go honours them;
 * the driver never did: its API traffic stays in the cluster). Why not undici: it parses HTTP and
 * wraps every response in JavaScript, which cost the controller 10 MB at 2,000 pods and every
 * process 7 MiB idle; why not Deno's `fetch`: its `caCerts` add to the default roots
 * (docs/benchmarks.md, "experiments"). An aborted request is never sent again ({@link
 * refuseAborted}: Deno's `node:http` would, ADR 0013). `tests/kube_contract/http_transport_test.ts`
 * checks all of this against local servers.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";

/** What the transport needs to reach one API server. */
export interface TransportOptions {
  /** Base URL of the server (`https://…` or `http://…`; the TLS settings apply to https only). */
  readonly server: string;
  /** PEM CA bundle trusted for the server, and nothing else. */
  readonly ca?: string | undefined;
  /** PEM client certificate and key presented to the server. */
  readonly cert?: string | undefined;
  readonly key?: string | undefined;
  /** Do not verify the server's certificate (kubeconfig `insecure-skip-tls-verify`). */
  readonly insecureSkipTLSVerify?: boolean | undefined;
  /** Name verified in the server's certificate (kubeconfig `tls-server-name`). */
  readonly tlsServerName?: string | undefined;
  /** How long a connection may stay idle in the pool. @default {@link IDLE_TIMEOUT_MS} */
  readonly idleTimeoutMs?: number;
}

/** One request. `body` is sent as given (the caller sets `content-type`). */
export interface TransportRequest {
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | undefined;
  /** Aborts the request, and the reading of its body. */
  readonly signal: AbortSignal;
  /**
   * Asked synchronously at the last moment before the request's bytes leave on a connection (pooled,
   * or new once connected and past the TLS handshake); throwing refuses the request with that error
   * and nothing of it is sent. Asked again if the request is sent on another connection. The
   * leader's write fence ({@link guardEachSend}).
   */
  readonly guard?: (() => void) | undefined;
}

/** The parts of a fetch `Response` the REST client reads. */
export interface TransportResponse {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  readonly body: ReadableStream<Uint8Array>;
}

/** Connections per server (undici's `connections` before). */
const MAX_SOCKETS = 32;

/**
 * How long a kept-alive connection may stay idle before the pool closes it (undici's
 * `keepAliveTimeout` before): one that a NAT or firewall dropped silently would otherwise make the
 * next request wait for its deadline.
 */
export const IDLE_TIMEOUT_MS = 30_000;

/**
 * Error codes of failures before any response that may be retried on a fresh connection: refused,
 * reset or closed (a kept-alive connection the server dropped: "socket hang up" is ECONNRESET), a
 * broken pipe, a connect timeout. TLS failures have other codes and are not retried.
 */
const CONNECTION_FAILURE = /^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|ECONNABORTED)$/;

/** The request option that carries the request's signal to the agent (see {@link refuseAborted}). */
const REQUEST_SIGNAL = "s3csiRequestSignal";

/**
 * Make `agent` refuse any request whose signal has aborted: the request fails with the signal's
 * reason and is never handed to a connection.
 *
 * Why: Deno's `node:http` (2.9.6) sends a request again, on another connection, when it was aborted
 * while waiting for its answer on a reused kept-alive connection — the abort closes that connection
 * and Deno takes it for a stale one. A write its caller gave up on (the leader's fenced write, whose
 * deadline is the lease's) then reached the API server after all. That second send goes through
 * the agent's `addRequest` with the same options; Deno drops the `signal` option before the agent,
 * so the signal travels under {@link REQUEST_SIGNAL}. `tests/kube_contract/http_transport_test.ts`
 * pins this against a server that counts what it receives.
 */
function refuseAborted(agent: http.Agent): void {
  type AddRequest = (
    req: http.ClientRequest,
    options: Record<string, unknown> | undefined,
    ...rest: unknown[]
  ) => void;
  const a = agent as unknown as { addRequest: AddRequest };
  const add = a.addRequest.bind(agent);
  a.addRequest = (req, options, ...rest) => {
    const signal = options?.[REQUEST_SIGNAL] as AbortSignal | undefined;
    if (!signal?.aborted) return add(req, options, ...rest);
    queueMicrotask(() => {
      req.emit("error", signal.reason ?? new DOMException("aborted", "AbortError"));
      req.emit("close");
    });
  };
}

/**
 * Ask `guard` at the last moment before `req`'s bytes go out, on every connection it is sent on;
 * when it throws, `req` is destroyed with that error and nothing of it is sent.
 *
 * Why: a request is written to a pooled connection a tick after `request()` (right after its
 * `socket` event), and leaves on a new one only once it is connected (and, over https, past its
 * handshake): the pending write runs from a `connect` (`secureConnect`) listener added after ours.
 * A guard asked when the request is made (the leader's write fence) left that time open: a leader
 * stopped (SIGSTOP) in it and resumed after its lease was taken sent its write on resuming (seen
 * in the real-apiserver failover test, 1 run in 15). Deno re-sends a request on a new connection
 * when its first one closed (see {@link refuseAborted}): each `socket` event asks again.
 *
 * The request itself is ended as usual, right away: ending it from the `socket` event instead
 * left Deno's pooled socket corked, and the next request on it was never sent.
 */
function guardEachSend(req: http.ClientRequest, guard: () => void, tls: boolean): void {
  req.on("socket", (socket) => {
    const check = () => {
      if (req.destroyed) return;
      try {
        guard();
      } catch (err) {
        req.destroy(err as Error);
      }
    };
    const s = socket as typeof socket & { _secureEstablished?: boolean };
    if (s.connecting || (tls && s._secureEstablished === false)) {
      s.once(tls ? "secureConnect" : "connect", check);
    } else check();
  });
}

/** An error when a response ends before its last byte. */
class TruncatedBodyError extends Error {
  override readonly name = "TruncatedBodyError";
}

/** The response body of `res` as a web stream (paused while nobody reads). */
function webBody(res: http.IncomingMessage): ReadableStream<Uint8Array> {
  let settled = false;
  return new ReadableStream<Uint8Array>({
    start(c) {
      res.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        c.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        if ((c.desiredSize ?? 1) <= 0) res.pause();
      });
      res.once("end", () => {
        if (settled) return;
        settled = true;
        c.close();
      });
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        c.error(err);
      };
      res.on("error", fail);
      // A connection closed before the body's end (the server died, the request was aborted).
      res.once("close", () => {
        if (!res.complete) fail(new TruncatedBodyError("the response ended before its body did"));
      });
    },
    pull() {
      res.resume();
    },
    cancel() {
      settled = true;
      res.destroy();
    },
  }, { highWaterMark: 4 });
}

/** Sends HTTP/1.1 requests to one API server over a pool of kept-alive connections. */
export class HttpTransport {
  readonly #options: TransportOptions;
  readonly #https: boolean;
  #agent: http.Agent;
  /** The TLS settings of the current pool's connections (node:https reads them per request). */
  #tlsOptions: https.AgentOptions;
  readonly #idleMs: number;
  /** When each pooled connection last became idle. */
  readonly #idleSince = new WeakMap<object, number>();
  readonly #sweeper: ReturnType<typeof setInterval>;

  /** Create the connection pool for `options.server`. */
  constructor(options: TransportOptions) {
    this.#options = options;
    this.#https = new URL(options.server).protocol === "https:";
    this.#tlsOptions = this.#tls(options.cert, options.key);
    this.#agent = this.#create(this.#tlsOptions);
    this.#idleMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    this.#sweeper = setInterval(() => this.#closeIdle(), Math.max(10, this.#idleMs / 2));
    // Never what keeps a process alive (a Deno timer id, or a Node.js Timeout under node types).
    const t: unknown = this.#sweeper;
    if (typeof t === "number") Deno.unrefTimer(t);
    else (t as { unref?: () => void }).unref?.();
  }

  /** Close the pooled connections idle for {@link IDLE_TIMEOUT_MS} or longer. */
  #closeIdle(): void {
    const now = Date.now();
    for (const sockets of Object.values(this.#agent.freeSockets)) {
      for (const socket of sockets ?? []) {
        if (now - (this.#idleSince.get(socket) ?? now) >= this.#idleMs) socket.destroy();
      }
    }
  }

  /** The TLS settings of connections presenting `cert` (none over plain http). */
  #tls(cert: string | undefined, key: string | undefined): https.AgentOptions {
    if (!this.#https) return {};
    const o = this.#options;
    return {
      ...(o.ca ? { ca: o.ca } : {}),
      ...(cert ? { cert, key } : {}),
      ...(o.tlsServerName ? { servername: o.tlsServerName } : {}),
      rejectUnauthorized: !o.insecureSkipTLSVerify,
    };
  }

  #create(tls: https.AgentOptions): http.Agent {
    const pool = { keepAlive: true, maxSockets: MAX_SOCKETS };
    const agent = this.#https ? new https.Agent({ ...pool, ...tls }) : new http.Agent(pool);
    agent.on("free", (socket: object) => this.#idleSince.set(socket, Date.now()));
    refuseAborted(agent);
    return agent;
  }

  /** Send one request; resolves once the response headers are in. */
  send(url: URL, request: TransportRequest): Promise<TransportResponse> {
    request.signal.throwIfAborted();
    const agent = this.#agent;
    const tls = this.#tlsOptions;
    const headers: Record<string, string> = { ...request.headers };
    if (request.body !== undefined) {
      headers["content-length"] = String(new TextEncoder().encode(request.body).byteLength);
    }
    return new Promise((resolve, reject) => {
      const options: https.RequestOptions & { [REQUEST_SIGNAL]: AbortSignal } = {
        method: request.method,
        headers,
        agent,
        signal: request.signal,
        [REQUEST_SIGNAL]: request.signal,
        // The pool's TLS settings, repeated: node:https reads them from the request too.
        ...tls,
      };
      const req = (this.#https ? https : http).request(url, options, (res) => {
        const status = res.statusCode ?? 0;
        resolve({
          status,
          ok: status >= 200 && status < 300,
          headers: {
            get(name: string): string | null {
              const v = res.headers[name.toLowerCase()];
              return v === undefined ? null : Array.isArray(v) ? v.join(", ") : String(v);
            },
          },
          body: webBody(res),
        });
      });
      // Every error is handled (a rejection after the response is a no-op): none may go uncaught.
      req.on("error", reject);
      if (request.guard) guardEachSend(req, request.guard, this.#https);
      req.end(request.body);
    });
  }

  /**
   * Present `cert` and `key` on new connections from now on (exec credential plugins may issue a
   * new certificate); requests already sent finish on their connection.
   */
  useClientCertificate(cert: string, key: string | undefined): void {
    const old = this.#agent;
    this.#tlsOptions = this.#tls(cert, key);
    this.#agent = this.#create(this.#tlsOptions);
    this.#retire(old);
  }

  /** Close `agent`'s idle connections now and its busy ones when their response ends. */
  #retire(agent: http.Agent): void {
    (agent as { keepAlive?: boolean }).keepAlive = false;
    for (const sockets of Object.values(agent.freeSockets)) {
      for (const socket of sockets ?? []) socket.destroy();
    }
  }

  /**
   * True when `err`, thrown by {@link send}, is a network failure before any response (refused,
   * reset, a kept-alive connection the server closed): the request may be sent again on a fresh
   * connection. TLS and DNS failures are not.
   */
  isConnectionError(err: unknown): boolean {
    const code = (err as { code?: unknown } | null)?.code;
    return typeof code === "string" && CONNECTION_FAILURE.test(code);
  }

  /** Close the connections; the transport is not used afterwards. */
  close(): Promise<void> {
    clearInterval(this.#sweeper);
    this.#agent.destroy();
    return Promise.resolve();
  }
}
