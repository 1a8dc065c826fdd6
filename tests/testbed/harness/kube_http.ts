/**
 * A deliberately raw Kubernetes HTTP client for the contract suite: it exposes status codes,
 * headers and bodies exactly as sent, so the same assertions can run against the emulator and a
 * real kube-apiserver. Built on `node:http(s)` because Deno's fetch cannot skip TLS verification,
 * which the real test cluster's kubeconfig asks for.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";
import { Buffer } from "node:buffer";
import { parse as parseYaml } from "yaml";

/** Connection settings read from a kubeconfig's current context. */
export interface KubeTarget {
  /** Display name. */
  readonly name: string;
  /** Server base URL. */
  readonly server: string;
  /** Bearer token. */
  readonly token?: string | undefined;
  /** Skip TLS verification. */
  readonly insecure: boolean;
  /** CA bundle (PEM). */
  readonly ca?: string | undefined;
  /** Client certificate and key (PEM). */
  readonly cert?: string | undefined;
  /** Client key (PEM). */
  readonly key?: string | undefined;
}

type Named<T> = { name: string } & T;

function b64(text: unknown): string | undefined {
  return typeof text === "string" ? Buffer.from(text, "base64").toString("utf8") : undefined;
}

/** Read the current context of a kubeconfig file. */
export async function loadTarget(name: string, path: string): Promise<KubeTarget> {
  const doc = parseYaml(await Deno.readTextFile(path)) as {
    "current-context": string;
    contexts: Named<{ context: { cluster: string; user: string } }>[];
    clusters: Named<{ cluster: Record<string, unknown> }>[];
    users: Named<{ user: Record<string, unknown> }>[];
  };
  const ctx = doc.contexts.find((c) => c.name === doc["current-context"])!.context;
  const cluster = doc.clusters.find((c) => c.name === ctx.cluster)!.cluster;
  const user = doc.users.find((u) => u.name === ctx.user)?.user ?? {};
  return {
    name,
    server: String(cluster.server),
    token: typeof user.token === "string" ? user.token : undefined,
    insecure: cluster["insecure-skip-tls-verify"] === true,
    ca: b64(cluster["certificate-authority-data"]),
    cert: b64(user["client-certificate-data"]),
    key: b64(user["client-key-data"]),
  };
}

/** A response as received. */
export interface KubeResponse {
  /** HTTP status. */
  readonly status: number;
  /** Response headers (lower-case names). */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Raw body. */
  readonly text: string;
  /** Parsed JSON body (undefined if not JSON). */
  // deno-lint-ignore no-explicit-any
  readonly body: any;
}

/** Request options. */
export interface RequestOptions {
  /** JSON-serialised unless a string. */
  readonly body?: unknown;
  /** Content-Type of the body. @default application/json */
  readonly contentType?: string;
  /** Accept header. @default application/json */
  readonly accept?: string;
  /** Abort after this long. @default 10000 */
  readonly timeoutMs?: number;
}

/** Raw HTTP access to one API server. */
export class KubeHttp {
  readonly #t: KubeTarget;
  readonly #agent: http.Agent;

  /** Create a client for `target`. */
  constructor(target: KubeTarget) {
    this.#t = target;
    this.#agent = target.server.startsWith("https")
      ? new https.Agent({
        keepAlive: false,
        rejectUnauthorized: !target.insecure,
        ...(target.ca ? { ca: target.ca } : {}),
        ...(target.cert ? { cert: target.cert, key: target.key } : {}),
      })
      : new http.Agent({ keepAlive: false });
  }

  /** Name of the target. */
  get name(): string {
    return this.#t.name;
  }

  #open(method: string, path: string, options: RequestOptions): Promise<http.IncomingMessage> {
    const url = new URL(path, this.#t.server);
    const body = options.body === undefined
      ? undefined
      : typeof options.body === "string"
      ? options.body
      : JSON.stringify(options.body);
    const headers: Record<string, string> = { accept: options.accept ?? "application/json" };
    if (this.#t.token) headers.authorization = `Bearer ${this.#t.token}`;
    if (body !== undefined) headers["content-type"] = options.contentType ?? "application/json";
    const mod = url.protocol === "https:" ? https : http;
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = mod.request(url, { method, headers, agent: this.#agent }, resolve);
      req.setTimeout(
        options.timeoutMs ?? 10_000,
        () => req.destroy(new Error(`timeout: ${method} ${path}`)),
      );
      req.on("error", reject);
      if (body !== undefined) req.write(body);
      req.end();
    });
  }

  /** Send a request and read the whole response. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<KubeResponse> {
    const res = await this.#open(method, path, options);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    return { status: res.statusCode ?? 0, headers: res.headers, text, body };
  }

  /**
   * Open a watch and collect its events until `until` returns true for the list so far, the
   * stream ends, or `timeoutMs` passes. Returns the events received.
   */
  async watch(
    path: string,
    // deno-lint-ignore no-explicit-any
    until: (events: any[]) => boolean,
    options: { timeoutMs?: number; accept?: string } = {},
    // deno-lint-ignore no-explicit-any
  ): Promise<{ status: number; events: any[] }> {
    const timeoutMs = options.timeoutMs ?? 10_000;
    const pending = this.#open("GET", path, {
      timeoutMs: timeoutMs + 1000,
      ...(options.accept ? { accept: options.accept } : {}),
    });
    const res = await pending;
    // deno-lint-ignore no-explicit-any
    const events: any[] = [];
    let buf = "";
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        timer = setTimeout(resolve, timeoutMs);
        res.on("data", (chunk: Buffer) => {
          buf += chunk.toString("utf8");
          let nl: number;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line) events.push(JSON.parse(line));
          }
          if (until(events)) resolve();
        });
        res.on("end", () => resolve());
        res.on("error", reject);
      });
    } finally {
      clearTimeout(timer);
      res.destroy();
    }
    return { status: res.statusCode ?? 0, events };
  }

  /** Release sockets. */
  close(): void {
    this.#agent.destroy();
  }
}
