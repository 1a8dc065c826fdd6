/**
 * A TCP proxy in front of an API server (emulator over http, or the real one over https), one per
 * controller process, that understands just enough HTTP/1.1 to record every request it forwards,
 * and that can *freeze*: while frozen nothing passes in either direction — requests are held (not
 * forwarded) and response bytes, including open watch streams, are not delivered — so the
 * process's API connection hangs as in a network partition. A held request whose client closes
 * the connection (its deadline gave up) is dropped, never forwarded; after a thaw traffic flows
 * again, held requests whose client still waits included.
 *
 * The records are the evidence of the leader-election tests: each request with the test process's
 * monotonic times at which it was forwarded and at which its answer's status line came back from
 * the server (the server had acted by then; noted on arrival, also while frozen, although the
 * bytes reach the client only after a thaw), so writes of two processes can be ordered as the API
 * server saw them.
 *
 * Each client connection gets its own upstream connection; requests on one connection are
 * answered in order (the REST client does not pipeline), which is how answers are matched.
 *
 * @module
 */
import net from "node:net";
import tls from "node:tls";
import { Buffer } from "node:buffer";
import { renderKubeconfig } from "../testbed/apiserver/kubeconfig.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";

/** One forwarded request. */
export interface ProxyRecord {
  readonly method: string;
  readonly path: string;
  /** `performance.now()` when it was forwarded. */
  readonly sentAt: number;
  /** `performance.now()` when the answer's status line arrived (the server had acted). */
  doneAt?: number;
  status?: number;
  /** For lease writes: the holder the request wrote. */
  readonly holder?: string;
}

/** True for writes (what "acting" means). */
export function isWrite(r: ProxyRecord): boolean {
  return ["POST", "PUT", "PATCH", "DELETE"].includes(r.method);
}

/** True for a request on a Lease. */
export function isLease(r: ProxyRecord): boolean {
  return /\/leases(\/|$|\?)/.test(r.path);
}

const CRLF2 = Buffer.from("\r\n\r\n");

function headerValue(head: string, name: string): string | undefined {
  const m = new RegExp(`^${name}:\\s*(.*)$`, "im").exec(head);
  return m?.[1]?.trim();
}

/**
 * Length of the body of the request whose head (`headLen` bytes) starts `buf`, or -1 when it is not
 * complete yet. Chunked bodies are walked chunk by chunk.
 */
function bodyLength(buf: Buffer, headLen: number, head: string): number {
  if (/^transfer-encoding:.*chunked/im.test(head)) {
    let pos = headLen;
    for (;;) {
      const eol = buf.indexOf("\r\n", pos);
      if (eol < 0) return -1;
      const size = parseInt(buf.subarray(pos, eol).toString("latin1"), 16);
      if (!Number.isFinite(size)) throw new Error("bad chunk size");
      // The last chunk ("0" CRLF) and the empty trailer (CRLF); clients send no trailers.
      if (size === 0) return buf.length >= eol + 4 ? eol + 4 - headLen : -1;
      pos = eol + 2 + size + 2;
      if (pos > buf.length) return -1;
    }
  }
  const len = Number(headerValue(head, "content-length") ?? 0);
  return buf.length - headLen >= len ? len : -1;
}

/** A running proxy. */
export class ApiProxy implements AsyncDisposable {
  /** Forwarded requests, in order. */
  readonly records: ProxyRecord[] = [];
  /** Requests dropped because their client closed the connection while the proxy was frozen. */
  dropped = 0;
  readonly kubeconfigPath: string;
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  #frozen = false;
  readonly #onThaw = new Set<() => void>();
  /** Upstream connections still reading answers for clients that went away. */
  readonly #draining = new Set<() => void>();

  private constructor(server: net.Server, kubeconfigPath: string) {
    this.#server = server;
    this.kubeconfigPath = kubeconfigPath;
  }

  /** Start a proxy to the API server of `upstreamKubeconfig`; writes a kubeconfig for clients. */
  static async start(upstreamKubeconfig: string, dir: string, name: string): Promise<ApiProxy> {
    const up = kubeConfigFromFile(upstreamKubeconfig);
    const target = new URL(up.server);
    const secure = target.protocol === "https:";
    const port = Number(target.port || (secure ? 443 : 80));
    const connect = (): net.Socket =>
      secure
        ? tls.connect({
          host: target.hostname,
          port,
          rejectUnauthorized: false,
          ...(up.ca ? { ca: up.ca } : {}),
        })
        : net.connect({ host: target.hostname, port });
    const holder: { proxy?: ApiProxy } = {};
    const server = net.createServer((client) => holder.proxy!.#serve(client, connect));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address() as net.AddressInfo;
    const kubeconfigPath = `${dir}/${name}.kubeconfig`;
    await Deno.writeTextFile(
      kubeconfigPath,
      renderKubeconfig({ server: `http://127.0.0.1:${address.port}`, token: up.token, name }),
    );
    holder.proxy = new ApiProxy(server, kubeconfigPath);
    return holder.proxy;
  }

  /** Upstream connections still reading answers for clients that closed (they close after). */
  get draining(): number {
    return this.#draining.size;
  }

  /** Hang every connection: nothing passes until {@link thaw}. */
  freeze(): void {
    this.#frozen = true;
  }

  /** Let traffic flow again. */
  thaw(): void {
    this.#frozen = false;
    for (const f of [...this.#onThaw]) f();
  }

  #whenThawed(f: () => void): void {
    if (!this.#frozen) return f();
    const once = () => {
      this.#onThaw.delete(once);
      f();
    };
    this.#onThaw.add(once);
  }

  #serve(client: net.Socket, connect: () => net.Socket): void {
    this.#sockets.add(client);
    let upstream: net.Socket | undefined;
    let fromClient = Buffer.alloc(0);
    let fromServer = Buffer.alloc(0);
    /** Forwarded requests on this connection still waiting for their answer's status line. */
    const waiting: { record: ProxyRecord; head: boolean }[] = [];
    /** Bytes of the answer in progress still to pass before the next answer starts. */
    let inBody = 0;
    let inChunked = false;
    let held = false;
    let closed = false;
    /** The upstream connection is kept after the client closed while answers are outstanding. */
    let drainTimer: ReturnType<typeof setTimeout> | undefined;
    /** End the upstream connection, and its draining when it was kept for that. */
    const closeUpstream = () => {
      this.#draining.delete(closeUpstream);
      clearTimeout(drainTimer);
      upstream?.destroy();
    };
    const close = () => {
      if (closed) {
        // The upstream connection, kept to read outstanding answers, ended too.
        if (upstream?.destroyed) closeUpstream();
        return;
      }
      closed = true;
      this.#sockets.delete(client);
      client.destroy();
      // A request already forwarded is acted on by the server even when its client died (a
      // SIGKILLed leader): read its answer, so its record says when the server had acted.
      if (waiting.length === 0 || upstream === undefined || upstream.destroyed) {
        closeUpstream();
      } else {
        this.#draining.add(closeUpstream);
        drainTimer = setTimeout(closeUpstream, 30_000);
      }
    };
    const pumpRequests = () => {
      if (closed || held) return;
      const end = fromClient.indexOf(CRLF2);
      if (end < 0) return;
      const head = fromClient.subarray(0, end + 4).toString("latin1");
      const len = bodyLength(fromClient, end + 4, head);
      if (len < 0) return;
      const raw = fromClient.subarray(0, end + 4 + len);
      fromClient = fromClient.subarray(end + 4 + len);
      const [method = "", path = ""] = head.split(" ");
      held = true;
      this.#whenThawed(() => {
        held = false;
        if (closed) {
          this.dropped++;
          return;
        }
        let holder: string | undefined;
        if (/\/leases(\/|$)/.test(path) && len > 0) {
          try {
            holder = JSON.parse(raw.subarray(end + 4).toString("utf8"))?.spec?.holderIdentity;
          } catch { /* not JSON */ }
        }
        const record: ProxyRecord = {
          method,
          path,
          sentAt: performance.now(),
          ...(holder !== undefined ? { holder } : {}),
        };
        this.records.push(record);
        waiting.push({ record, head: method === "HEAD" });
        if (!upstream) {
          upstream = connect();
          upstream.on("data", (d: Buffer) => {
            fromServer = Buffer.concat([fromServer, d]);
            pumpResponses();
          });
          upstream.on("close", close);
          upstream.on("error", close);
        }
        upstream.write(raw);
        pumpRequests();
      });
    };
    /** Answer bytes parsed (and recorded) but not yet passed on: held while frozen. */
    const outQueue: Buffer[] = [];
    const flush = () => {
      if (closed) {
        outQueue.length = 0;
        return;
      }
      if (this.#frozen) {
        this.#whenThawed(flush);
        return;
      }
      for (const b of outQueue.splice(0)) client.write(b);
    };
    /** Pass answer bytes on; after the client closed they are only parsed, for the records. */
    const deliver = (b: Buffer) => {
      if (!closed) {
        outQueue.push(b);
        flush();
      } else if (waiting.length === 0 && inBody === 0 && !inChunked) {
        closeUpstream();
      }
    };
    // Answers: note the status of each as it arrives (the server has acted then, frozen or not),
    // then pass the bytes on (held while frozen).
    const pumpResponses = () => {
      if (closed && upstream?.destroyed !== false) return;
      while (fromServer.length > 0) {
        if (inBody > 0 || inChunked) {
          let n: number;
          if (inChunked) {
            // Pass whole chunks; the zero-size chunk ends the answer.
            const eol = fromServer.indexOf("\r\n");
            if (eol < 0) return;
            const size = parseInt(fromServer.subarray(0, eol).toString("latin1"), 16);
            const need = eol + 2 + size + 2;
            if (fromServer.length < need) return;
            n = need;
            if (size === 0) inChunked = false;
          } else {
            n = Math.min(inBody, fromServer.length);
            inBody -= n;
          }
          deliver(fromServer.subarray(0, n));
          fromServer = fromServer.subarray(n);
          continue;
        }
        const end = fromServer.indexOf(CRLF2);
        if (end < 0) return;
        const head = fromServer.subarray(0, end + 4).toString("latin1");
        const status = Number(head.split(" ")[1]);
        const req = waiting.shift();
        if (req && status >= 200) {
          req.record.status = status;
          req.record.doneAt = performance.now();
        } else if (req) waiting.unshift(req); // 1xx: the real answer follows
        const noBody = req?.head || status === 204 || status === 304 || status < 200;
        if (!noBody && /^transfer-encoding:.*chunked/im.test(head)) inChunked = true;
        else if (!noBody) inBody = Number(headerValue(head, "content-length") ?? 0);
        deliver(fromServer.subarray(0, end + 4));
        fromServer = fromServer.subarray(end + 4);
      }
    };
    client.on("data", (d: Buffer) => {
      fromClient = Buffer.concat([fromClient, d]);
      pumpRequests();
    });
    client.on("end", close);
    client.on("close", close);
    client.on("error", close);
  }

  /** Stop serving and cut every connection. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.thaw();
    for (const s of this.#sockets) s.destroy();
    for (const closeUpstream of [...this.#draining]) closeUpstream();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
