/**
 * One server-side HTTP/2 connection (RFC 9113), as much as a unary gRPC server needs: it reads
 * requests (a header block and a body, both complete), hands each to a handler, and writes the
 * handler's answer (headers, an optional body, optional trailers) with flow control.
 *
 * It is written to survive any peer: every frame is checked before it is acted on; a protocol
 * violation ends the connection with GOAWAY (or the stream with RST_STREAM) and never throws
 * out of {@link Http2ServerConnection.serve}; a peer that disconnects, resets a stream, sends
 * GOAWAY or stops reading only ends its own streams, whose handlers see their `signal` abort.
 * Resources are bounded (`limits.ts` has the defaults):
 *
 * - concurrent streams, refused above the limit (handlers still running for a reset stream
 *   included);
 * - the request bytes held: header lists and bodies count from their arrival until their handler
 *   returns, against the connection's limit and the server's {@link ReceiveBudget}; the peer may
 *   send DATA only within the window we granted (more is a `FLOW_CONTROL_ERROR`), and the window
 *   is reopened only while the held bytes stay within both limits (`receive_budget.ts`);
 * - time: the handshake, and each request (its header block and body must arrive within
 *   `requestTimeoutMs` of its first HEADERS frame: RST_STREAM `CANCEL`, or GOAWAY for a header
 *   block left unfinished); optionally the idle time;
 * - output: reading pauses while more than {@link OUTPUT_HIGH_WATER} bytes wait to be written
 *   (a peer that sends PINGs without reading the answers), and a peer that reads nothing for
 *   `requestTimeoutMs` meanwhile is disconnected;
 * - the HPACK state (`hpack.ts`).
 *
 * Not supported (not needed by gRPC unary calls): server push, priorities (ignored), HTTP/1.1
 * upgrade, request trailers (accepted and ignored).
 *
 * @module
 */
import { encodeHeaders, type HeaderField, HpackDecoder, HpackError } from "./hpack.ts";
import { checkLimit, DEFAULT_LIMITS, type LimitEvent } from "./limits.ts";
import { ReceiveBudget, ReceiveFlow } from "./receive_budget.ts";
import {
  DEFAULT_MAX_FRAME_SIZE,
  DEFAULT_WINDOW,
  ErrorCode,
  Flag,
  frame,
  FRAME_HEADER_BYTES,
  FrameType,
  goawayFrame,
  MAX_WINDOW,
  parseFrameHeader,
  PREFACE,
  readU32,
  rstStreamFrame,
  Setting,
  settingsFrame,
  unpad,
  windowUpdateFrame,
} from "./http2_frames.ts";

/** The byte stream under a connection (a `Deno.Conn` fits). */
export interface Http2Transport {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
}

/** A complete request. */
export interface IncomingRequest {
  readonly streamId: number;
  /** Request headers in wire order (pseudo-headers first). */
  readonly headers: readonly HeaderField[];
  /** The body (empty when {@link tooLarge}). */
  readonly body: Uint8Array;
  /** The body exceeded the limit; it was not kept. */
  readonly tooLarge: boolean;
  /** Aborted when the peer resets the stream or the connection ends. */
  readonly signal: AbortSignal;
}

/** The answer to a request. */
export interface OutgoingResponse {
  readonly headers: readonly HeaderField[];
  readonly body?: Uint8Array | undefined;
  readonly trailers?: readonly HeaderField[] | undefined;
}

/** Serves one request; should not reject (a rejection resets the stream). */
export type Http2Handler = (req: IncomingRequest) => Promise<OutgoingResponse>;

/** Limits of a connection (defaults in `limits.ts`). */
export interface Http2ConnectionOptions {
  /** Streams open at once, handlers still running included. @default 32 */
  readonly maxConcurrentStreams?: number;
  /** Largest request body kept. @default 4 MiB + 5 */
  readonly maxBodyBytes?: number;
  /** Largest request header list (RFC 7541 size). @default 16384 */
  readonly maxHeaderListSize?: number;
  /**
   * Request bytes this connection may hold: header lists and bodies of its streams until their
   * handlers return, plus the flow-control window it grants. Must leave room for one body of
   * `maxBodyBytes`. @default maxBodyBytes + 1 MiB
   */
  readonly maxBufferedBytes?: number;
  /**
   * The server-wide budget of held request bytes, shared by its connections. @default a budget of
   * this connection's own `maxBufferedBytes`
   */
  readonly budget?: ReceiveBudget;
  /**
   * Time allowed for a request to arrive whole (its header block and body), from its first HEADERS
   * frame; then the stream is reset (`CANCEL`), or the connection ends when the header block itself
   * is unfinished. Also how long a peer may leave our output unread. @default 10000
   */
  readonly requestTimeoutMs?: number;
  /** Time allowed for the preface and the first SETTINGS. @default 10000 */
  readonly handshakeTimeoutMs?: number;
  /**
   * A connection without streams for this long is closed (GOAWAY); 0 never closes one. Off by
   * default: CSI clients are local and trusted (the socket is root-only), and a GOAWAY sent to an
   * idle grpc-js client is the very path that crashes Deno's `node:http2` (ADR 0008).
   * @default 0
   */
  readonly idleTimeoutMs?: number;
  /** Called when a limit refuses or cuts a stream, or ends the connection (for logs). */
  readonly onLimit?: (event: LimitEvent) => void;
}

/** Why a connection ended (for logs and tests). */
export interface ConnectionEnd {
  /** `"eof"`: the peer closed; `"error"`: we sent GOAWAY with an error; `"shutdown"`; `"io"`. */
  readonly reason: "eof" | "error" | "shutdown" | "io" | "timeout";
  readonly detail?: string;
}

class ConnectionError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

interface Stream {
  readonly id: number;
  headers: HeaderField[];
  chunks: Uint8Array[];
  received: number;
  tooLarge: boolean;
  remoteClosed: boolean;
  localClosed: boolean;
  handling: boolean;
  /** The handler has not returned yet. */
  handlerRunning: boolean;
  /** Gone from the stream table (answered or reset). */
  released: boolean;
  /** Released while its handler was still running (counted in `#orphanHandlers`). */
  orphan: boolean;
  sendWindow: number;
  /** What the peer may still send on this stream. */
  recvWindow: number;
  /** Request bytes held for this stream (header list and body), given back by `#unhold`. */
  held: number;
  /** Ends the stream when its request is not complete in time. */
  timer: ReturnType<typeof setTimeout> | undefined;
  readonly abort: AbortController;
}

const MAX_HEADER_BLOCK = 64 * 1024;
/** Bytes waiting to be written above which the peer is considered not to read. */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;
/** Bytes waiting to be written above which we stop reading the peer until they are written. */
export const OUTPUT_HIGH_WATER = 64 * 1024;
/** Bytes read from the transport at once (a frame's largest payload, and its header). */
const READ_CHUNK = DEFAULT_MAX_FRAME_SIZE + FRAME_HEADER_BYTES;

/** The size of a header list as RFC 7541 §4.1 counts it (name + value + 32 per field). */
function headerListSize(headers: readonly HeaderField[]): number {
  return headers.reduce((n, [name, value]) => n + name.length + value.length + 32, 0);
}

/** One HTTP/2 server connection. */
export class Http2ServerConnection {
  readonly #t: Http2Transport;
  readonly #handler: Http2Handler;
  readonly #maxStreams: number;
  readonly #maxBody: number;
  readonly #maxHeaderList: number;
  readonly #handshakeMs: number;
  readonly #requestMs: number;
  readonly #idleMs: number;
  readonly #onLimit: ((event: LimitEvent) => void) | undefined;
  readonly #decoder: HpackDecoder;
  readonly #budget: ReceiveBudget;
  readonly #flow: ReceiveFlow;
  readonly #streams = new Map<number, Stream>();
  /** Handlers still running for streams already reset (they count against the stream limit). */
  #orphanHandlers = 0;
  #cancelBudgetWait: (() => void) | undefined;
  #lastActive = performance.now();
  #lastStreamId = 0;
  #connSendWindow = DEFAULT_WINDOW;
  #peerInitialWindow = DEFAULT_WINDOW;
  #peerMaxFrame = DEFAULT_MAX_FRAME_SIZE;
  #tableSizeUpdate: number | undefined;
  #writeQueue: Uint8Array[] = [];
  #queuedBytes = 0;
  /** Bytes of the batch being written. */
  #inFlightBytes = 0;
  #onDrained: (() => void) | undefined;
  #writing: Promise<void> | undefined;
  #windowWaiters = new Set<() => void>();
  #closed = false;
  #goingAway = false;
  #end: ConnectionEnd | undefined;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Header block being assembled (HEADERS without END_HEADERS, then CONTINUATIONs). */
  #continuation: { streamId: number; flags: number; parts: Uint8Array[]; size: number } | undefined;
  #continuationTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #done: Promise<ConnectionEnd>;
  #resolveDone!: (end: ConnectionEnd) => void;

  /** Create a connection; call {@link serve}. */
  constructor(
    transport: Http2Transport,
    handler: Http2Handler,
    options: Http2ConnectionOptions = {},
  ) {
    const owner = "Http2ServerConnection";
    this.#t = transport;
    this.#handler = handler;
    this.#maxStreams = checkLimit(
      owner,
      "maxConcurrentStreams",
      options.maxConcurrentStreams ?? DEFAULT_LIMITS.maxConcurrentStreams,
      1,
    );
    this.#maxBody = checkLimit(
      owner,
      "maxBodyBytes",
      options.maxBodyBytes ?? DEFAULT_LIMITS.maxReceiveBytes + 5,
    );
    this.#maxHeaderList = checkLimit(
      owner,
      "maxHeaderListSize",
      options.maxHeaderListSize ?? DEFAULT_LIMITS.maxHeaderListSize,
    );
    this.#handshakeMs = checkLimit(
      owner,
      "handshakeTimeoutMs",
      options.handshakeTimeoutMs ?? DEFAULT_LIMITS.handshakeTimeoutMs,
      1,
    );
    this.#requestMs = checkLimit(
      owner,
      "requestTimeoutMs",
      options.requestTimeoutMs ?? DEFAULT_LIMITS.requestTimeoutMs,
      1,
    );
    this.#idleMs = checkLimit(owner, "idleTimeoutMs", options.idleTimeoutMs ?? 0);
    // Room for one whole body (one byte more, to see that it is too large) and the window.
    const maxBuffered = checkLimit(
      owner,
      "maxBufferedBytes",
      options.maxBufferedBytes ?? this.#maxBody + DEFAULT_LIMITS.connectionBufferSlack,
      this.#maxBody + 1 + DEFAULT_WINDOW,
    );
    this.#budget = options.budget ?? new ReceiveBudget(maxBuffered);
    this.#flow = new ReceiveFlow(this.#budget, {
      limit: maxBuffered,
      initialWindow: DEFAULT_WINDOW,
      target: DEFAULT_WINDOW,
    });
    this.#onLimit = options.onLimit;
    this.#decoder = new HpackDecoder({
      maxTableSize: 4096,
      maxHeaderListSize: this.#maxHeaderList,
    });
    this.#done = new Promise((resolve) => (this.#resolveDone = resolve));
  }

  /** Streams currently open (for tests and metrics). */
  get openStreams(): number {
    return this.#streams.size;
  }

  /** Request bytes this connection holds (header lists and bodies; for tests and metrics). */
  get heldBytes(): number {
    return this.#flow.held;
  }

  /**
   * No stream open, no header block or handler pending: closing it loses nothing (the server
   * closes such a connection to make room for a new one when it has too many).
   */
  get idle(): boolean {
    return !this.#closed && !this.#goingAway && this.#streams.size === 0 &&
      this.#orphanHandlers === 0 && !this.#continuation;
  }

  /** When a stream last opened or closed (`performance.now()`). */
  get lastActive(): number {
    return this.#lastActive;
  }

  /** Resolves when the connection has ended. */
  get done(): Promise<ConnectionEnd> {
    return this.#done;
  }

  /** Read and serve until the connection ends; never rejects. */
  async serve(): Promise<ConnectionEnd> {
    const handshake = setTimeout(
      () => this.#finish({ reason: "timeout", detail: "no HTTP/2 preface" }),
      this.#handshakeMs,
    );
    try {
      await this.#readLoop(() => clearTimeout(handshake));
    } catch (err) {
      if (err instanceof ConnectionError) {
        this.#goaway(err.code, err.message);
        this.#finish({ reason: "error", detail: err.message });
      } else {
        // A bug or an I/O error: end this connection only.
        this.#finish({ reason: "io", detail: err instanceof Error ? err.message : String(err) });
      }
    } finally {
      clearTimeout(handshake);
    }
    return await this.#done;
  }

  /** Graceful shutdown: GOAWAY, refuse new streams, close once the open ones are answered. */
  shutdown(): void {
    if (this.#closed || this.#goingAway) return;
    this.#goingAway = true;
    this.#goaway(ErrorCode.NO_ERROR, "server shutting down");
    this.#maybeCloseAfterGoaway();
  }

  /** Close now; every open stream's signal aborts. */
  destroy(reason = "connection closed by the server"): void {
    this.#finish({ reason: "shutdown", detail: reason });
  }

  /** Close now with a GOAWAY saying why (`code`, e.g. `ENHANCE_YOUR_CALM`). */
  close(code: number, detail: string): void {
    if (this.#closed) return;
    this.#goaway(code, detail);
    this.#finish({ reason: code === ErrorCode.NO_ERROR ? "shutdown" : "error", detail });
  }

  #finish(end: ConnectionEnd): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#end = end;
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#continuationTimer);
    this.#cancelBudgetWait?.();
    for (const s of this.#streams.values()) {
      clearTimeout(s.timer);
      s.released = true;
      s.abort.abort(
        new Error(`HTTP/2 connection ended (${end.reason}${end.detail ? `: ${end.detail}` : ""})`),
      );
      if (!s.handlerRunning) this.#unhold(s);
    }
    this.#streams.clear();
    this.#continuation = undefined;
    for (const w of this.#windowWaiters) w();
    this.#windowWaiters.clear();
    this.#onDrained?.();
    // Let queued frames (GOAWAY) go out first, bounded: the peer may not be reading.
    const flushed = this.#writing ?? Promise.resolve();
    let timer: ReturnType<typeof setTimeout> | undefined;
    Promise.race([flushed, new Promise((r) => (timer = setTimeout(r, 1000)))]).finally(() => {
      clearTimeout(timer);
      try {
        this.#t.close();
      } catch { /* already closed */ }
      this.#resolveDone(this.#end!);
    });
  }

  // ---------------------------------------------------------------- reading

  async #readLoop(onHandshake: () => void): Promise<void> {
    let buf = new Uint8Array(0);
    const chunk = new Uint8Array(READ_CHUNK);
    let prefaceSeen = false;
    let settingsSeen = false;
    // The windows stay at the protocol's initial 65,535 bytes; they are reopened as requests are
    // read, within the limits (`#onData`).
    this.#send(settingsFrame([
      [Setting.MAX_CONCURRENT_STREAMS, this.#maxStreams],
      [Setting.MAX_HEADER_LIST_SIZE, this.#maxHeaderList],
      [Setting.ENABLE_PUSH, 0],
    ]));
    this.#armIdle();
    while (!this.#closed) {
      if (!await this.#outputDrained()) {
        this.#finish({ reason: "timeout", detail: "the peer does not read its answers" });
        return;
      }
      if (this.#closed) return;
      let n: number | null;
      try {
        n = await this.#t.read(chunk);
      } catch (err) {
        if (this.#closed) return;
        this.#finish({ reason: "io", detail: err instanceof Error ? err.message : String(err) });
        return;
      }
      if (n === null) {
        this.#finish({ reason: "eof" });
        return;
      }
      if (this.#closed) return;
      const joined = new Uint8Array(buf.length + n);
      joined.set(buf);
      joined.set(chunk.subarray(0, n), buf.length);
      buf = joined;
      let offset = 0;
      if (!prefaceSeen) {
        const have = Math.min(buf.length, PREFACE.length);
        for (let i = 0; i < have; i++) {
          if (buf[i] !== PREFACE[i]) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "not an HTTP/2 connection preface");
          }
        }
        if (buf.length < PREFACE.length) continue;
        prefaceSeen = true;
        offset = PREFACE.length;
      }
      while (buf.length - offset >= FRAME_HEADER_BYTES) {
        const h = parseFrameHeader(buf, offset);
        if (!(h.length <= DEFAULT_MAX_FRAME_SIZE)) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `frame of ${h.length} bytes`);
        }
        if (buf.length - offset < FRAME_HEADER_BYTES + h.length) break;
        const payload = buf.slice(
          offset + FRAME_HEADER_BYTES,
          offset + FRAME_HEADER_BYTES + h.length,
        );
        offset += FRAME_HEADER_BYTES + h.length;
        if (!settingsSeen) {
          if (h.type !== FrameType.SETTINGS || h.flags & Flag.ACK) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "first frame is not SETTINGS");
          }
          settingsSeen = true;
          onHandshake();
        }
        this.#onFrame(h.type, h.flags, h.streamId, payload);
        if (this.#closed) return;
      }
      buf = buf.slice(offset);
    }
  }

  #onFrame(type: number, flags: number, streamId: number, payload: Uint8Array): void {
    if (this.#continuation && type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "expected CONTINUATION");
    }
    switch (type) {
      case FrameType.DATA:
        return this.#onData(flags, streamId, payload);
      case FrameType.HEADERS:
        return this.#onHeaders(flags, streamId, payload);
      case FrameType.PRIORITY:
        if (streamId === 0) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0");
        }
        if (payload.length !== 5) this.#resetStream(streamId, ErrorCode.FRAME_SIZE_ERROR);
        return;
      case FrameType.RST_STREAM:
        return this.#onRstStream(streamId, payload);
      case FrameType.SETTINGS:
        return this.#onSettings(flags, streamId, payload);
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
      case FrameType.PING:
        if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream");
        if (payload.length !== 8) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING size");
        }
        if (!(flags & Flag.ACK)) this.#send(frame(FrameType.PING, Flag.ACK, 0, payload));
        return;
      case FrameType.GOAWAY:
        if (streamId !== 0) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
        }
        if (payload.length < 8) {
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY size");
        }
        // The peer opens no new streams; the open ones are still answered.
        this.#goingAway = true;
        this.#maybeCloseAfterGoaway();
        return;
      case FrameType.WINDOW_UPDATE:
        return this.#onWindowUpdate(streamId, payload);
      case FrameType.CONTINUATION:
        return this.#onContinuation(flags, streamId, payload);
      default:
        return; // unknown frame types are ignored (RFC 9113 §4.1)
    }
  }

  #onSettings(flags: number, streamId: number, payload: Uint8Array): void {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.length) {
        throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK size");
      }
      return;
    }
    if (payload.length % 6) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS size");
    const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    for (let i = 0; i < payload.length; i += 6) {
      const id = view.getUint16(i);
      const value = view.getUint32(i + 2);
      switch (id) {
        case Setting.HEADER_TABLE_SIZE:
          // Our encoder keeps no table; acknowledge the peer's size with an update to 0.
          this.#tableSizeUpdate = 0;
          break;
        case Setting.ENABLE_PUSH:
          if (value > 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "ENABLE_PUSH value");
          break;
        case Setting.INITIAL_WINDOW_SIZE: {
          if (!(value <= MAX_WINDOW)) {
            throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE value");
          }
          const delta = value - this.#peerInitialWindow;
          this.#peerInitialWindow = value;
          for (const s of this.#streams.values()) {
            s.sendWindow += delta;
            if (!(s.sendWindow <= MAX_WINDOW)) {
              throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
            }
          }
          this.#wakeWindowWaiters();
          break;
        }
        case Setting.MAX_FRAME_SIZE:
          if (!(value >= DEFAULT_MAX_FRAME_SIZE && value <= 0xff_ffff)) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "MAX_FRAME_SIZE value");
          }
          this.#peerMaxFrame = value;
          break;
        default:
          break; // MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE, unknown: nothing to do
      }
    }
    this.#send(settingsFrame([], true));
  }

  #onHeaders(flags: number, streamId: number, payload: Uint8Array): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "HEADERS on stream 0");
    let block = unpad(payload, flags);
    if (block === undefined) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "bad padding");
    if (flags & Flag.PRIORITY) {
      if (block.length < 5) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "HEADERS size");
      if ((readU32(block, 0) & 0x7fff_ffff) === streamId) {
        this.#resetStream(streamId, ErrorCode.PROTOCOL_ERROR);
      }
      block = block.subarray(5);
    }
    if (flags & Flag.END_HEADERS) {
      this.#onHeaderBlock(streamId, flags, block);
    } else {
      this.#continuation = { streamId, flags, parts: [block], size: block.length };
      this.#continuationTimer = setTimeout(() => {
        const detail = `a header block was not complete within ${this.#requestMs} ms`;
        this.#onLimit?.({ kind: "header block timeout", detail });
        this.close(ErrorCode.ENHANCE_YOUR_CALM, detail);
      }, this.#requestMs);
    }
  }

  #onContinuation(flags: number, streamId: number, payload: Uint8Array): void {
    const c = this.#continuation;
    if (!c || c.streamId !== streamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "unexpected CONTINUATION");
    }
    c.parts.push(payload);
    c.size += payload.length;
    if (!(c.size <= MAX_HEADER_BLOCK)) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "header block too large");
    }
    if (!(flags & Flag.END_HEADERS)) return;
    this.#continuation = undefined;
    clearTimeout(this.#continuationTimer);
    const block = new Uint8Array(c.size);
    let o = 0;
    for (const p of c.parts) {
      block.set(p, o);
      o += p.length;
    }
    this.#onHeaderBlock(streamId, c.flags, block);
  }

  #onHeaderBlock(streamId: number, flags: number, block: Uint8Array): void {
    // Always decode: the HPACK state is shared by the whole connection.
    let headers: HeaderField[];
    try {
      headers = this.#decoder.decode(block);
    } catch (err) {
      if (err instanceof HpackError) {
        throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, `bad header block: ${err.message}`);
      }
      throw err;
    }
    const endStream = (flags & Flag.END_STREAM) !== 0;
    const existing = this.#streams.get(streamId);
    if (existing) {
      // Trailers of the request: must end the stream; their content is not used.
      if (existing.remoteClosed) {
        this.#resetStream(streamId, ErrorCode.STREAM_CLOSED);
      } else if (!endStream) {
        this.#resetStream(streamId, ErrorCode.PROTOCOL_ERROR);
      } else {
        this.#endOfRequest(existing);
      }
      return;
    }
    if (streamId % 2 === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "even stream id");
    if (streamId <= this.#lastStreamId) {
      // A stream that was closed (answered or reset): ignore, but tell the peer.
      this.#send(rstStreamFrame(streamId, ErrorCode.STREAM_CLOSED));
      return;
    }
    this.#lastStreamId = streamId;
    if (this.#goingAway || !(this.#streams.size + this.#orphanHandlers < this.#maxStreams)) {
      this.#send(rstStreamFrame(streamId, ErrorCode.REFUSED_STREAM));
      return;
    }
    // A header list is held until its handler returns; no window protects it, so a stream whose
    // headers do not fit in this connection's limit or the server's budget is refused.
    const headerBytes = headerListSize(headers);
    if (!this.#flow.tryHold(headerBytes)) {
      this.#onLimit?.({
        kind: "stream refused",
        detail: `refused stream ${streamId}: its connection holds ${this.#flow.held} request ` +
          `bytes, the server ${this.#budget.used}`,
      });
      this.#send(rstStreamFrame(streamId, ErrorCode.REFUSED_STREAM));
      return;
    }
    const s: Stream = {
      id: streamId,
      headers,
      chunks: [],
      received: 0,
      tooLarge: false,
      remoteClosed: false,
      localClosed: false,
      handling: false,
      handlerRunning: false,
      released: false,
      orphan: false,
      sendWindow: this.#peerInitialWindow,
      recvWindow: DEFAULT_WINDOW,
      held: headerBytes,
      timer: undefined,
      abort: new AbortController(),
    };
    this.#streams.set(streamId, s);
    this.#lastActive = performance.now();
    clearTimeout(this.#idleTimer);
    if (endStream) {
      this.#endOfRequest(s);
    } else {
      s.timer = setTimeout(() => {
        if (s.released || s.remoteClosed) return;
        this.#onLimit?.({
          kind: "request timeout",
          detail: `the request on stream ${s.id} was not complete within ${this.#requestMs} ms ` +
            `(${s.received} body bytes): reset`,
        });
        this.#resetStream(s.id, ErrorCode.CANCEL);
      }, this.#requestMs);
    }
  }

  #onData(flags: number, streamId: number, payload: Uint8Array): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0");
    // Flow control counts the whole payload, padding included (RFC 9113 §6.9.1), on every stream,
    // closed ones included: a peer that sends beyond the window it was granted ends here.
    if (!this.#flow.receive(payload.length)) {
      throw new ConnectionError(
        ErrorCode.FLOW_CONTROL_ERROR,
        `DATA beyond the connection's flow-control window (${payload.length} bytes, ${this.#flow.window} allowed)`,
      );
    }
    this.#onStreamData(flags, streamId, payload);
    // Bytes not held (padding, late or refused frames) reopen the window at once; held ones once
    // their stream's handler returns.
    this.#reopenWindow();
  }

  #onStreamData(flags: number, streamId: number, payload: Uint8Array): void {
    const data = unpad(payload, flags);
    if (data === undefined) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "bad padding");
    const s = this.#streams.get(streamId);
    if (!s) {
      if (streamId > this.#lastStreamId) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on an idle stream");
      }
      return; // a stream we closed: late frames are ignored
    }
    if (s.remoteClosed) {
      this.#resetStream(streamId, ErrorCode.STREAM_CLOSED);
      return;
    }
    if (!(payload.length <= s.recvWindow)) {
      this.#onLimit?.({
        kind: "stream flow control",
        detail: `DATA beyond the flow-control window of stream ${streamId}: reset`,
      });
      this.#resetStream(streamId, ErrorCode.FLOW_CONTROL_ERROR);
      return;
    }
    s.recvWindow -= payload.length;
    if (!s.tooLarge) {
      s.received += data.length;
      if (!(s.received <= this.#maxBody)) {
        s.tooLarge = true;
        s.chunks = [];
        this.#unholdBody(s);
        // Answer now (the handler is told); the rest of the body is not wanted, and the stream's
        // window is not reopened for it.
        this.#startHandler(s);
      } else {
        s.chunks.push(data);
        s.held += data.length;
        this.#flow.hold(data.length);
        if (payload.length > 0 && !(flags & Flag.END_STREAM)) {
          // The stream's window only paces it: the connection's bounds what is held.
          s.recvWindow += payload.length;
          this.#send(windowUpdateFrame(streamId, payload.length));
        }
      }
    }
    if (flags & Flag.END_STREAM) this.#endOfRequest(s);
  }

  /** Reopen the connection's window as far as the limits allow, or wait for bytes to be freed. */
  #reopenWindow(): void {
    if (this.#closed) return;
    const increment = this.#flow.grant();
    if (increment > 0) this.#send(windowUpdateFrame(0, increment));
    if (this.#flow.wantsGrant && !this.#cancelBudgetWait) {
      // Held bytes (of this connection or another) must be freed first.
      this.#cancelBudgetWait = this.#budget.onRelease(() => {
        this.#cancelBudgetWait = undefined;
        this.#reopenWindow();
      });
    }
  }

  /** Give back a stream's held bytes (its handler returned, or none will run). */
  #unhold(s: Stream): void {
    if (s.held === 0) return;
    const n = s.held;
    s.held = 0;
    this.#flow.release(n);
    this.#reopenWindow();
  }

  /** Give back the body bytes of a stream whose body is dropped (too large). */
  #unholdBody(s: Stream): void {
    const body = s.held - headerListSize(s.headers);
    if (body <= 0) return;
    s.held -= body;
    this.#flow.release(body);
  }

  #onRstStream(streamId: number, payload: Uint8Array): void {
    if (streamId === 0) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0");
    }
    if (payload.length !== 4) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM size");
    }
    if (streamId > this.#lastStreamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on an idle stream");
    }
    const s = this.#streams.get(streamId);
    if (!s) return;
    s.abort.abort(new Error(`The client cancelled the call (RST_STREAM ${readU32(payload, 0)})`));
    s.localClosed = true;
    s.remoteClosed = true;
    this.#release(s);
  }

  #onWindowUpdate(streamId: number, payload: Uint8Array): void {
    if (payload.length !== 4) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE size");
    }
    const increment = readU32(payload, 0) & 0x7fff_ffff;
    if (streamId === 0) {
      if (increment === 0) {
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      }
      this.#connSendWindow += increment;
      if (!(this.#connSendWindow <= MAX_WINDOW)) {
        throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow");
      }
    } else {
      const s = this.#streams.get(streamId);
      if (!s) {
        if (streamId > this.#lastStreamId) {
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
        }
        return;
      }
      if (increment === 0) {
        this.#resetStream(streamId, ErrorCode.PROTOCOL_ERROR);
        return;
      }
      s.sendWindow += increment;
      if (!(s.sendWindow <= MAX_WINDOW)) {
        this.#resetStream(streamId, ErrorCode.FLOW_CONTROL_ERROR);
        return;
      }
    }
    this.#wakeWindowWaiters();
  }

  // ---------------------------------------------------------------- streams

  #endOfRequest(s: Stream): void {
    s.remoteClosed = true;
    clearTimeout(s.timer);
    this.#startHandler(s);
  }

  #startHandler(s: Stream): void {
    if (s.handling) return;
    s.handling = true;
    s.handlerRunning = true;
    const body = new Uint8Array(s.tooLarge ? 0 : s.received);
    if (!s.tooLarge) {
      let o = 0;
      for (const c of s.chunks) {
        body.set(c, o);
        o += c.length;
      }
    }
    s.chunks = [];
    const request: IncomingRequest = {
      streamId: s.id,
      headers: s.headers,
      body,
      tooLarge: s.tooLarge,
      signal: s.abort.signal,
    };
    Promise.resolve()
      .then(() => this.#handler(request))
      .finally(() => {
        // The request's bytes are no longer needed by anyone.
        s.handlerRunning = false;
        if (s.orphan) {
          s.orphan = false;
          this.#orphanHandlers--;
        }
        this.#unhold(s);
        if (this.#goingAway) this.#maybeCloseAfterGoaway();
      })
      .then(
        (response) => this.#respond(s, response),
        () => this.#resetStream(s.id, ErrorCode.INTERNAL_ERROR),
      )
      .catch(() => this.#resetStream(s.id, ErrorCode.INTERNAL_ERROR));
  }

  async #respond(s: Stream, response: OutgoingResponse): Promise<void> {
    if (s.localClosed || this.#closed) return;
    const body = response.body && response.body.length > 0 ? response.body : undefined;
    const trailers = response.trailers && response.trailers.length > 0
      ? response.trailers
      : undefined;
    this.#sendHeaders(s.id, response.headers, !body && !trailers);
    if (body) {
      let offset = 0;
      while (offset < body.length) {
        const available = Math.min(this.#connSendWindow, s.sendWindow, this.#peerMaxFrame);
        if (available <= 0) {
          await this.#waitForWindow();
          if (s.localClosed || this.#closed) return;
          continue;
        }
        const n = Math.min(available, body.length - offset);
        const last = offset + n === body.length;
        this.#send(
          frame(
            FrameType.DATA,
            last && !trailers ? Flag.END_STREAM : 0,
            s.id,
            body.subarray(offset, offset + n),
          ),
        );
        this.#connSendWindow -= n;
        s.sendWindow -= n;
        offset += n;
      }
    }
    if (trailers) this.#sendHeaders(s.id, trailers, true);
    s.localClosed = true;
    if (!s.remoteClosed) {
      // Answered before the request ended (e.g. body too large): the rest is not wanted.
      this.#send(rstStreamFrame(s.id, ErrorCode.NO_ERROR));
      s.remoteClosed = true;
    }
    this.#release(s);
  }

  #sendHeaders(streamId: number, fields: readonly HeaderField[], endStream: boolean): void {
    const block = encodeHeaders(fields, this.#tableSizeUpdate);
    this.#tableSizeUpdate = undefined;
    const end = endStream ? Flag.END_STREAM : 0;
    if (block.length <= this.#peerMaxFrame) {
      this.#send(frame(FrameType.HEADERS, end | Flag.END_HEADERS, streamId, block));
      return;
    }
    for (let o = 0; o < block.length; o += this.#peerMaxFrame) {
      const part = block.subarray(o, o + this.#peerMaxFrame);
      const lastPart = o + this.#peerMaxFrame >= block.length;
      const type = o === 0 ? FrameType.HEADERS : FrameType.CONTINUATION;
      const flags = (o === 0 ? end : 0) | (lastPart ? Flag.END_HEADERS : 0);
      this.#send(frame(type, flags, streamId, part));
    }
  }

  #resetStream(streamId: number, code: number): void {
    if (this.#closed) return;
    this.#send(rstStreamFrame(streamId, code));
    const s = this.#streams.get(streamId);
    if (!s) return;
    s.abort.abort(new Error(`HTTP/2 stream reset (code ${code})`));
    s.localClosed = true;
    s.remoteClosed = true;
    this.#release(s);
  }

  #release(s: Stream): void {
    if (!s.localClosed || !s.remoteClosed || s.released) return;
    s.released = true;
    clearTimeout(s.timer);
    this.#streams.delete(s.id);
    this.#lastActive = performance.now();
    // A handler still running (the stream was reset) keeps its request and its stream slot.
    if (s.handlerRunning) {
      s.orphan = true;
      this.#orphanHandlers++;
    } else {
      this.#unhold(s);
    }
    this.#wakeWindowWaiters();
    if (this.#goingAway) this.#maybeCloseAfterGoaway();
    else if (this.#streams.size === 0) this.#armIdle();
  }

  #maybeCloseAfterGoaway(): void {
    if (this.#streams.size === 0 && this.#orphanHandlers === 0 && !this.#continuation) {
      this.#finish({
        reason: this.#end?.reason ?? "shutdown",
        detail: "GOAWAY and no open streams",
      });
    }
  }

  #armIdle(): void {
    clearTimeout(this.#idleTimer);
    if (this.#closed || this.#idleMs <= 0) return;
    this.#idleTimer = setTimeout(() => {
      if (this.#streams.size > 0) return;
      this.#goaway(ErrorCode.NO_ERROR, "idle");
      this.#finish({ reason: "timeout", detail: "idle" });
    }, this.#idleMs);
  }

  // ---------------------------------------------------------------- writing

  #goaway(code: number, debug: string): void {
    this.#send(goawayFrame(this.#lastStreamId, code, debug));
  }

  #waitForWindow(): Promise<void> {
    return new Promise((resolve) => this.#windowWaiters.add(resolve));
  }

  #wakeWindowWaiters(): void {
    const waiters = [...this.#windowWaiters];
    this.#windowWaiters.clear();
    for (const w of waiters) w();
  }

  /**
   * Wait until at most {@link OUTPUT_HIGH_WATER} bytes wait to be written (at once when so);
   * false when the peer read nothing for `requestTimeoutMs` meanwhile.
   */
  async #outputDrained(): Promise<boolean> {
    if (this.#queuedBytes + this.#inFlightBytes <= OUTPUT_HIGH_WATER || this.#closed) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const drained = await new Promise<boolean>((resolve) => {
      this.#onDrained = () => resolve(true);
      timer = setTimeout(() => resolve(false), this.#requestMs);
    });
    clearTimeout(timer);
    this.#onDrained = undefined;
    return drained;
  }

  #send(bytes: Uint8Array): void {
    if (this.#closed && !this.#writing) return;
    this.#queuedBytes += bytes.length;
    if (!(this.#queuedBytes <= MAX_QUEUED_BYTES) && !this.#closed) {
      // The peer does not read what it asks for (e.g. a PING flood): drop it.
      this.#writeQueue = [];
      this.#queuedBytes = 0;
      this.#finish({ reason: "error", detail: "the peer does not read its answers" });
      return;
    }
    this.#writeQueue.push(bytes);
    this.#writing ??= this.#pump();
  }

  async #pump(): Promise<void> {
    try {
      while (this.#writeQueue.length > 0) {
        const batch = this.#writeQueue;
        this.#writeQueue = [];
        this.#queuedBytes = 0;
        const total = batch.reduce((n, b) => n + b.length, 0);
        this.#inFlightBytes = total;
        const bytes = new Uint8Array(total);
        let o = 0;
        for (const b of batch) {
          bytes.set(b, o);
          o += b.length;
        }
        let written = 0;
        while (written < bytes.length) {
          written += await this.#t.write(bytes.subarray(written));
          this.#inFlightBytes = bytes.length - written;
          if (this.#queuedBytes + this.#inFlightBytes <= OUTPUT_HIGH_WATER) this.#onDrained?.();
        }
      }
    } catch (err) {
      this.#writeQueue = [];
      this.#finish({
        reason: "io",
        detail: `write failed: ${err instanceof Error ? err.message : err}`,
      });
    } finally {
      this.#inFlightBytes = 0;
      this.#writing = undefined;
    }
  }
}
