/**
 * One server-side HTTP/2 connection (RFC 9113), as much as a unary gRPC server needs: it reads
 * requests (a header block and a body, both complete), hands each to a handler, and writes the
 * handler's answer (headers, an optional body, optional trailers) with flow control.
 *
 * It is written to survive any peer: every frame is checked before it is acted on; a protocol
 * violation ends the connection with GOAWAY (or the stream with RST_STREAM) and never throws
 * out of {@link Http2ServerConnection.serve}; a peer that disconnects, resets a stream, sends
 * GOAWAY or stops reading only ends its own streams, whose handlers see their `signal` abort.
 * Resources are bounded: concurrent streams (refused above the limit, handlers included), the
 * size of header lists and of request bodies, the handshake time, unread output, and (optionally)
 * the idle time.
 *
 * Not supported (not needed by gRPC unary calls): server push, priorities (ignored), HTTP/1.1
 * upgrade, request trailers (accepted and ignored).
 *
 * @module
 */
import { encodeHeaders, type HeaderField, HpackDecoder, HpackError } from "./hpack.ts";
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

/** Limits of a connection. */
export interface Http2ConnectionOptions {
  /** Streams open at once, handlers still running included. @default 32 */
  readonly maxConcurrentStreams?: number;
  /** Largest request body kept. @default 4 MiB + 5 */
  readonly maxBodyBytes?: number;
  /** Largest request header list (RFC 7541 size). @default 16384 */
  readonly maxHeaderListSize?: number;
  /** Time allowed for the preface and the first SETTINGS. @default 10000 */
  readonly handshakeTimeoutMs?: number;
  /**
   * A connection without streams for this long is closed (GOAWAY); 0 never closes one. Off by
   * default: CSI clients are local and trusted (the socket is root-only), and a GOAWAY sent to an
   * idle grpc-js client is the very path that crashes Deno's `node:http2` (ADR 0008).
   * @default 0
   */
  readonly idleTimeoutMs?: number;
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
  sendWindow: number;
  readonly abort: AbortController;
}

const MAX_HEADER_BLOCK = 64 * 1024;
/** Bytes waiting to be written above which the peer is considered not to read. */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;

/** One HTTP/2 server connection. */
export class Http2ServerConnection {
  readonly #t: Http2Transport;
  readonly #handler: Http2Handler;
  readonly #maxStreams: number;
  readonly #maxBody: number;
  readonly #handshakeMs: number;
  readonly #idleMs: number;
  readonly #decoder: HpackDecoder;
  readonly #streams = new Map<number, Stream>();
  #lastStreamId = 0;
  #connSendWindow = DEFAULT_WINDOW;
  #peerInitialWindow = DEFAULT_WINDOW;
  #peerMaxFrame = DEFAULT_MAX_FRAME_SIZE;
  #tableSizeUpdate: number | undefined;
  #writeQueue: Uint8Array[] = [];
  #queuedBytes = 0;
  #writing: Promise<void> | undefined;
  #windowWaiters = new Set<() => void>();
  #closed = false;
  #goingAway = false;
  #end: ConnectionEnd | undefined;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Header block being assembled (HEADERS without END_HEADERS, then CONTINUATIONs). */
  #continuation: { streamId: number; flags: number; parts: Uint8Array[]; size: number } | undefined;
  readonly #done: Promise<ConnectionEnd>;
  #resolveDone!: (end: ConnectionEnd) => void;

  /** Create a connection; call {@link serve}. */
  constructor(
    transport: Http2Transport,
    handler: Http2Handler,
    options: Http2ConnectionOptions = {},
  ) {
    this.#t = transport;
    this.#handler = handler;
    this.#maxStreams = options.maxConcurrentStreams ?? 32;
    this.#maxBody = options.maxBodyBytes ?? 4 * 1024 * 1024 + 5;
    this.#handshakeMs = options.handshakeTimeoutMs ?? 10_000;
    this.#idleMs = options.idleTimeoutMs ?? 0;
    this.#decoder = new HpackDecoder({
      maxTableSize: 4096,
      maxHeaderListSize: options.maxHeaderListSize ?? 16_384,
    });
    this.#done = new Promise((resolve) => (this.#resolveDone = resolve));
  }

  /** Streams currently open (for tests and metrics). */
  get openStreams(): number {
    return this.#streams.size;
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

  #finish(end: ConnectionEnd): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#end = end;
    clearTimeout(this.#idleTimer);
    for (const s of this.#streams.values()) {
      s.abort.abort(
        new Error(`HTTP/2 connection ended (${end.reason}${end.detail ? `: ${end.detail}` : ""})`),
      );
    }
    this.#streams.clear();
    for (const w of this.#windowWaiters) w();
    this.#windowWaiters.clear();
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
    const chunk = new Uint8Array(64 * 1024);
    let prefaceSeen = false;
    let settingsSeen = false;
    this.#send(settingsFrame([
      [Setting.MAX_CONCURRENT_STREAMS, this.#maxStreams],
      [Setting.MAX_HEADER_LIST_SIZE, 16_384],
      [Setting.ENABLE_PUSH, 0],
    ]));
    // Raise the connection window so request bodies up to the limit flow without waiting.
    this.#send(windowUpdateFrame(0, Math.min(MAX_WINDOW - DEFAULT_WINDOW, 1024 * 1024)));
    this.#armIdle();
    while (!this.#closed) {
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
        if (h.length > DEFAULT_MAX_FRAME_SIZE) {
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
          if (value > MAX_WINDOW) {
            throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE value");
          }
          const delta = value - this.#peerInitialWindow;
          this.#peerInitialWindow = value;
          for (const s of this.#streams.values()) {
            s.sendWindow += delta;
            if (s.sendWindow > MAX_WINDOW) {
              throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow");
            }
          }
          this.#wakeWindowWaiters();
          break;
        }
        case Setting.MAX_FRAME_SIZE:
          if (value < DEFAULT_MAX_FRAME_SIZE || value > 0xff_ffff) {
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
    }
  }

  #onContinuation(flags: number, streamId: number, payload: Uint8Array): void {
    const c = this.#continuation;
    if (!c || c.streamId !== streamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "unexpected CONTINUATION");
    }
    c.parts.push(payload);
    c.size += payload.length;
    if (c.size > MAX_HEADER_BLOCK) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "header block too large");
    }
    if (!(flags & Flag.END_HEADERS)) return;
    this.#continuation = undefined;
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
    if (this.#goingAway || this.#streams.size >= this.#maxStreams) {
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
      sendWindow: this.#peerInitialWindow,
      abort: new AbortController(),
    };
    this.#streams.set(streamId, s);
    clearTimeout(this.#idleTimer);
    if (endStream) this.#endOfRequest(s);
  }

  #onData(flags: number, streamId: number, payload: Uint8Array): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0");
    // Flow control counts the whole payload, padding included: give it back to the connection.
    if (payload.length > 0) this.#send(windowUpdateFrame(0, payload.length));
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
    if (!s.tooLarge) {
      s.received += data.length;
      if (s.received > this.#maxBody) {
        s.tooLarge = true;
        s.chunks = [];
        // Answer now (the handler is told); the rest of the body is not wanted.
        this.#startHandler(s);
      } else {
        s.chunks.push(data);
        if (payload.length > 0 && !(flags & Flag.END_STREAM)) {
          this.#send(windowUpdateFrame(streamId, payload.length));
        }
      }
    }
    if (flags & Flag.END_STREAM) this.#endOfRequest(s);
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
      if (this.#connSendWindow > MAX_WINDOW) {
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
      if (s.sendWindow > MAX_WINDOW) {
        this.#resetStream(streamId, ErrorCode.FLOW_CONTROL_ERROR);
        return;
      }
    }
    this.#wakeWindowWaiters();
  }

  // ---------------------------------------------------------------- streams

  #endOfRequest(s: Stream): void {
    s.remoteClosed = true;
    this.#startHandler(s);
  }

  #startHandler(s: Stream): void {
    if (s.handling) return;
    s.handling = true;
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
    if (!s.localClosed || !s.remoteClosed) return;
    this.#streams.delete(s.id);
    this.#wakeWindowWaiters();
    if (this.#goingAway) this.#maybeCloseAfterGoaway();
    else if (this.#streams.size === 0) this.#armIdle();
  }

  #maybeCloseAfterGoaway(): void {
    if (this.#streams.size === 0 && !this.#continuation) {
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

  #send(bytes: Uint8Array): void {
    if (this.#closed && !this.#writing) return;
    this.#queuedBytes += bytes.length;
    if (this.#queuedBytes > MAX_QUEUED_BYTES && !this.#closed) {
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
        const bytes = new Uint8Array(total);
        let o = 0;
        for (const b of batch) {
          bytes.set(b, o);
          o += b.length;
        }
        let written = 0;
        while (written < bytes.length) {
          written += await this.#t.write(bytes.subarray(written));
        }
      }
    } catch (err) {
      this.#writeQueue = [];
      this.#finish({
        reason: "io",
        detail: `write failed: ${err instanceof Error ? err.message : err}`,
      });
    } finally {
      this.#writing = undefined;
    }
  }
}
