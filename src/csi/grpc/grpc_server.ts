/**
 * A unary gRPC server (the gRPC over HTTP/2 protocol: request and response framing, status in
 * trailers, `grpc-timeout` deadlines, cancellation) on {@link Http2ServerConnection}, listening on
 * a unix socket with Deno's own socket API.
 *
 * Why not `@grpc/grpc-js`: it serves through `node:http2`, which Deno 2.9 implements on nghttp2;
 * that path has aborted the whole process inside nghttp2 when a peer's GOAWAY arrived (an
 * assertion in `find_stream_on_goaway_func`), which no JavaScript can catch. Here a misbehaving
 * client can only end its own connection (see ADR 0008).
 *
 * Every call gets an `AbortSignal` that aborts when the client's deadline passes, the client
 * cancels (RST_STREAM) or its connection ends. At the deadline the client is answered
 * DEADLINE_EXCEEDED at once, whatever the handler is still doing. A `grpc-timeout` longer than a
 * timer can wait ({@link MAX_TIMEOUT_MS}, about 24.8 days) means no practical deadline.
 *
 * Limits (defaults in `limits.ts`, ADR 0008): those of each connection (`http2_connection.ts`),
 * plus the connections open at once ({@link GrpcServerOptions.maxConnections}) and the request
 * bytes all of them hold together ({@link GrpcServerOptions.maxBufferedBytes}).
 *
 * @module
 */
import type { HeaderField } from "./hpack.ts";
import {
  type ConnectionEnd,
  type Http2ConnectionOptions,
  Http2ServerConnection,
  type Http2Transport,
  type IncomingRequest,
  type OutgoingResponse,
} from "./http2_connection.ts";
import { ErrorCode, goawayFrame, settingsFrame } from "./http2_frames.ts";
import { checkLimit, DEFAULT_LIMITS, type LimitEvent } from "./limits.ts";
import { ReceiveBudget } from "./receive_budget.ts";

/** gRPC status codes used by the transport itself (same numbers as `Code` in `csi/errors.ts`). */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  DEADLINE_EXCEEDED: 4,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** A call being served. */
export interface GrpcCall {
  /** Full method name, e.g. `/csi.v1.Node/NodePublishVolume`. */
  readonly method: string;
  /** Aborts at the deadline, on client cancel and when the connection ends. */
  readonly signal: AbortSignal;
  /** The client's deadline (`performance.now()` scale), if it sent one. */
  readonly deadline: number | undefined;
}

/** A failure with a gRPC status; anything else a handler throws is INTERNAL. */
export class GrpcStatusError extends Error {
  override name = "GrpcStatusError";
  /** Create an error answered with `code`. */
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

/** The reason a call's signal aborts when its deadline passes. */
export class DeadlineExceededError extends Error {
  override name = "DeadlineExceededError";
}

/** The reason a call's signal aborts when the client cancels or goes away. */
export class CallCancelledError extends Error {
  override name = "CallCancelledError";
}

/** A unary method: request message bytes in, response message bytes out. */
export type UnaryHandler = (request: Uint8Array, call: GrpcCall) => Promise<Uint8Array>;

/** Options of {@link GrpcServer} (defaults in `limits.ts`). */
export interface GrpcServerOptions {
  /** Largest request message. @default 4 MiB */
  readonly maxReceiveBytes?: number;
  /**
   * Connections open at once. A connection above the limit closes the one idle the longest
   * (GOAWAY `NO_ERROR`; its client reconnects), or is refused (GOAWAY `ENHANCE_YOUR_CALM`) when
   * every open one has a call in flight. @default 128
   */
  readonly maxConnections?: number;
  /**
   * Request bytes (header lists and bodies, until their handlers return) all connections hold
   * together; once reached, their flow-control windows stay closed and new streams are refused
   * until bytes are freed. At least one connection's `maxBufferedBytes`.
   * @default the larger of 16 MiB and twice one connection's `maxBufferedBytes`
   */
  readonly maxBufferedBytes?: number;
  /** HTTP/2 limits of each connection. */
  readonly connection?: Omit<Http2ConnectionOptions, "maxBodyBytes" | "budget" | "onLimit">;
  /** Called when a connection ends (for logs). */
  readonly onConnectionEnd?: (end: ConnectionEnd) => void;
  /** Called when a limit refuses or closes a connection, or cuts a stream (for logs). */
  readonly onLimit?: (event: LimitEvent) => void;
}

/**
 * The longest deadline a timer can wait (2^31 - 1 ms, about 24.8 days: `setTimeout` fires after
 * 1 ms for anything longer). A `grpc-timeout` above it means no practical deadline.
 */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

const TIMEOUT_UNITS: Record<string, number> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 0.001,
  n: 0.000001,
};

/** Parse a `grpc-timeout` header value (e.g. `"119999m"`) to milliseconds; undefined when bad. */
export function parseGrpcTimeout(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  return m ? Number(m[1]) * TIMEOUT_UNITS[m[2]!]! : undefined;
}

/** Percent-encode a status message as the gRPC spec asks (UTF-8, `%XX` outside 0x20-0x7e). */
export function encodeGrpcMessage(message: string): string {
  const bytes = new TextEncoder().encode(message);
  let out = "";
  for (const b of bytes) {
    out += b >= 0x20 && b <= 0x7e && b !== 0x25
      ? String.fromCharCode(b)
      : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const GRPC_CONTENT_TYPE = "application/grpc";
/** Longest status message sent (the rest is cut; logs keep everything). */
const MAX_STATUS_MESSAGE = 8 * 1024;

function statusOnly(code: number, message: string): OutgoingResponse {
  const text = message.length > MAX_STATUS_MESSAGE
    ? `${message.slice(0, MAX_STATUS_MESSAGE)}…`
    : message;
  return {
    headers: [
      [":status", "200"],
      ["content-type", GRPC_CONTENT_TYPE],
      ["grpc-status", String(code)],
      ["grpc-message", encodeGrpcMessage(text)],
    ],
  };
}

function httpError(status: number, text: string): OutgoingResponse {
  return {
    headers: [[":status", String(status)], ["content-type", "text/plain"]],
    body: new TextEncoder().encode(`${text}\n`),
  };
}

function header(headers: readonly HeaderField[], name: string): string | undefined {
  return headers.find(([n]) => n === name)?.[1];
}

/** A transport that is never used (to check a connection's options). */
const NO_TRANSPORT: Http2Transport = {
  read: () => Promise.resolve(null),
  write: (p) => Promise.resolve(p.length),
  close: () => {},
};

/** Refuse a connection: the server preface and a GOAWAY saying why, then close (bounded). */
async function refuse(transport: Http2Transport, why: string): Promise<void> {
  const settings = settingsFrame([]);
  const goaway = goawayFrame(0, ErrorCode.ENHANCE_YOUR_CALM, why);
  const bytes = new Uint8Array(settings.length + goaway.length);
  bytes.set(settings);
  bytes.set(goaway, settings.length);
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    transport.write(bytes).catch(() => 0),
    new Promise((r) => (timer = setTimeout(r, 1000))),
  ]);
  clearTimeout(timer);
  try {
    transport.close();
  } catch { /* already closed */ }
}

/** A unary gRPC server. */
export class GrpcServer {
  readonly #methods: ReadonlyMap<string, UnaryHandler>;
  readonly #o: GrpcServerOptions;
  readonly #maxReceive: number;
  readonly #maxConnections: number;
  readonly #budget: ReceiveBudget;
  readonly #connectionBuffered: number;
  readonly #connections = new Set<Http2ServerConnection>();
  #listener: Deno.Listener | undefined;
  #accepting: Promise<void> | undefined;
  #activeCalls = 0;

  /** Create a server for `methods` (full method name → handler). */
  constructor(methods: ReadonlyMap<string, UnaryHandler>, options: GrpcServerOptions = {}) {
    const owner = "GrpcServer";
    this.#methods = methods;
    this.#o = options;
    this.#maxReceive = checkLimit(
      owner,
      "maxReceiveBytes",
      options.maxReceiveBytes ?? DEFAULT_LIMITS.maxReceiveBytes,
    );
    this.#maxConnections = checkLimit(
      owner,
      "maxConnections",
      options.maxConnections ?? DEFAULT_LIMITS.maxConnections,
      1,
    );
    // Checked against the body size by each connection.
    this.#connectionBuffered = options.connection?.maxBufferedBytes ??
      this.#maxReceive + 5 + DEFAULT_LIMITS.connectionBufferSlack;
    this.#budget = new ReceiveBudget(checkLimit(
      owner,
      "maxBufferedBytes",
      options.maxBufferedBytes ??
        Math.max(DEFAULT_LIMITS.maxServerBufferBytes, 2 * this.#connectionBuffered),
      this.#connectionBuffered,
    ));
    // Each connection checks its own limits: check them once now, so a bad one fails at start-up.
    new Http2ServerConnection(NO_TRANSPORT, () => Promise.reject(), this.#connectionOptions());
  }

  #connectionOptions(): Http2ConnectionOptions {
    return {
      ...this.#o.connection,
      maxBodyBytes: this.#maxReceive + 5,
      maxBufferedBytes: this.#connectionBuffered,
      budget: this.#budget,
      ...(this.#o.onLimit ? { onLimit: this.#o.onLimit } : {}),
    };
  }

  /** Open connections. */
  get connections(): number {
    return this.#connections.size;
  }

  /** Request bytes held by all connections (header lists and bodies; for tests and metrics). */
  get bufferedBytes(): number {
    return this.#budget.used;
  }

  /** Handlers still running (including those whose client has gone). */
  get activeCalls(): number {
    return this.#activeCalls;
  }

  /** Listen on a unix socket at `path` (the file must not exist) and serve in the background. */
  listenUnix(path: string): void {
    const listener = Deno.listen({ transport: "unix", path });
    this.#listener = listener;
    this.#accepting = this.#acceptLoop(listener);
  }

  async #acceptLoop(listener: Deno.Listener): Promise<void> {
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (err) {
        if (this.#listener !== listener || err instanceof Deno.errors.BadResource) return;
        // EMFILE and the like: wait a little rather than spin, and keep serving.
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      void this.serveConnection(conn);
    }
  }

  /**
   * Serve one already-accepted connection until it ends. Never rejects. Above `maxConnections`, the
   * connection idle the longest is closed to make room, or this one is refused.
   */
  async serveConnection(transport: Http2Transport): Promise<ConnectionEnd> {
    if (!this.#makeRoom()) {
      const detail = `refused a connection: ${this.#connections.size} are open, the limit, ` +
        `and each has a call in flight`;
      this.#o.onLimit?.({ kind: "connection refused", detail });
      await refuse(transport, `too many connections (limit ${this.#maxConnections})`);
      return { reason: "error", detail };
    }
    const c = new Http2ServerConnection(
      transport,
      (req) => this.#handle(req),
      this.#connectionOptions(),
    );
    this.#connections.add(c);
    try {
      const end = await c.serve();
      this.#o.onConnectionEnd?.(end);
      return end;
    } finally {
      this.#connections.delete(c);
    }
  }

  /** True when a new connection may open: below the limit, or after closing the longest idle. */
  #makeRoom(): boolean {
    if (this.#connections.size < this.#maxConnections) return true;
    let oldest: Http2ServerConnection | undefined;
    for (const c of this.#connections) {
      if (c.idle && (!oldest || c.lastActive < oldest.lastActive)) oldest = c;
    }
    if (!oldest) return false;
    this.#connections.delete(oldest);
    oldest.close(ErrorCode.NO_ERROR, "idle connection closed to make room for a new one");
    this.#o.onLimit?.({
      kind: "idle connection closed",
      detail: `closed the connection idle the longest: ${this.#maxConnections} connections ` +
        `are open, the limit`,
    });
    return true;
  }

  /**
   * Stop: no new connections, GOAWAY to the open ones, wait up to `graceMs` for their calls, then
   * close what is left (the calls' signals abort).
   */
  async shutdown(graceMs: number): Promise<void> {
    const listener = this.#listener;
    this.#listener = undefined;
    try {
      listener?.close();
    } catch { /* closed */ }
    await this.#accepting?.catch(() => {});
    const open = [...this.#connections];
    for (const c of open) c.shutdown();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const allDone = Promise.all(open.map((c) => c.done)).then(() => true);
    const timedOut = new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs)));
    const clean = await Promise.race([allDone, timedOut]);
    clearTimeout(timer);
    if (!clean) { for (const c of this.#connections) c.destroy("server stopped"); }
    await Promise.all(open.map((c) => c.done));
  }

  async #handle(req: IncomingRequest): Promise<OutgoingResponse> {
    const method = header(req.headers, ":method");
    if (method !== "POST") return httpError(405, "gRPC calls use POST");
    const contentType = header(req.headers, "content-type") ?? "";
    if (!contentType.startsWith(GRPC_CONTENT_TYPE)) {
      return httpError(415, `unsupported content-type "${contentType}"`);
    }
    const path = header(req.headers, ":path") ?? "";
    const handler = this.#methods.get(path);
    if (!handler) return statusOnly(GrpcCode.UNIMPLEMENTED, `unknown method ${path}`);
    if (req.tooLarge) {
      return statusOnly(
        GrpcCode.RESOURCE_EXHAUSTED,
        `grpc: received message larger than max (limit ${this.#maxReceive} bytes)`,
      );
    }
    const body = req.body;
    if (body.length < 5) return statusOnly(GrpcCode.INTERNAL, "grpc: no request message");
    const length = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(1);
    if (body.length !== 5 + length) {
      return statusOnly(GrpcCode.INTERNAL, "grpc: a unary call needs exactly one request message");
    }
    if (body[0] !== 0) {
      const encoding = header(req.headers, "grpc-encoding");
      return statusOnly(
        encoding && encoding !== "identity" ? GrpcCode.UNIMPLEMENTED : GrpcCode.INTERNAL,
        `grpc: compressed messages are not supported (grpc-encoding "${encoding ?? ""}")`,
      );
    }
    const timeoutHeader = header(req.headers, "grpc-timeout");
    const parsedMs = timeoutHeader === undefined ? undefined : parseGrpcTimeout(timeoutHeader);
    if (timeoutHeader !== undefined && parsedMs === undefined) {
      return statusOnly(GrpcCode.INTERNAL, `grpc: malformed grpc-timeout "${timeoutHeader}"`);
    }
    // Beyond what a timer can wait: no practical deadline (never a 1 ms one).
    const timeoutMs = parsedMs !== undefined && parsedMs <= MAX_TIMEOUT_MS ? parsedMs : undefined;
    const abort = new AbortController();
    const onClientGone = () =>
      abort.abort(new CallCancelledError(`The client cancelled ${path} or went away`));
    if (req.signal.aborted) onClientGone();
    req.signal.addEventListener("abort", onClientGone, { once: true });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadlinePassed = new Promise<OutgoingResponse>((resolve) => {
      if (timeoutMs === undefined) return;
      timer = setTimeout(() => {
        abort.abort(new DeadlineExceededError(`The deadline of ${path} (${timeoutHeader}) passed`));
        resolve(statusOnly(GrpcCode.DEADLINE_EXCEEDED, `Deadline exceeded (${timeoutHeader})`));
      }, Math.max(0, timeoutMs));
    });
    const call: GrpcCall = {
      method: path,
      signal: abort.signal,
      deadline: timeoutMs === undefined ? undefined : performance.now() + timeoutMs,
    };
    this.#activeCalls++;
    const work = Promise.resolve()
      .then(() => handler(body.subarray(5), call))
      .then(
        (message): OutgoingResponse => {
          const framed = new Uint8Array(5 + message.length);
          new DataView(framed.buffer).setUint32(1, message.length);
          framed.set(message, 5);
          return {
            headers: [[":status", "200"], ["content-type", GRPC_CONTENT_TYPE]],
            body: framed,
            trailers: [["grpc-status", "0"]],
          };
        },
        (err: unknown) =>
          err instanceof GrpcStatusError ? statusOnly(err.code, err.message) : statusOnly(
            GrpcCode.INTERNAL,
            `Internal error: ${err instanceof Error ? err.message : err}`,
          ),
      )
      .finally(() => {
        this.#activeCalls--;
        clearTimeout(timer);
        req.signal.removeEventListener("abort", onClientGone);
      });
    return await Promise.race([work, deadlinePassed]);
  }
}
