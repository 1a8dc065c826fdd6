/**
 * A raw HTTP/2 client on a unix socket, speaking our own frames, for requests and peers no gRPC
 * client would be: {@link rawGrpcCall} (one call whose message need not be valid protobuf) and
 * {@link RawHttp2} (a connection that sends whatever frames a test asks for and records what the
 * server answers: headers, resets, GOAWAY, the flow-control windows it grants).
 *
 * @module
 */
import { encodeHeaders, type HeaderField, HpackDecoder } from "../../../src/csi/grpc/hpack.ts";
import {
  DEFAULT_WINDOW,
  Flag,
  frame,
  FRAME_HEADER_BYTES,
  FrameType,
  parseFrameHeader,
  PREFACE,
  readU32,
  Setting,
  settingsFrame,
} from "../../../src/csi/grpc/http2_frames.ts";
import { waitFor } from "../../../src/util/wait_for.ts";

/** A frame received. */
export interface RawFrame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly payload: Uint8Array;
}

/** The header block of a gRPC request for `path` (HPACK, literals without indexing). */
export function grpcRequestHeaders(path: string, extra: readonly HeaderField[] = []): Uint8Array {
  return encodeHeaders([
    [":method", "POST"],
    [":scheme", "http"],
    [":path", path],
    [":authority", "localhost"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ...extra,
  ]);
}

/** `message` in gRPC's length-prefixed framing (uncompressed). */
export function grpcMessage(message: Uint8Array): Uint8Array {
  const body = new Uint8Array(5 + message.length);
  new DataView(body.buffer).setUint32(1, message.length);
  body.set(message, 5);
  return body;
}

/**
 * One client connection with raw frames: the connection preface and an empty SETTINGS are sent
 * first, then what the server sends is read in the background (its SETTINGS acknowledged); writes
 * go out one after the other, never interleaved.
 */
export class RawHttp2 implements AsyncDisposable {
  readonly #conn: Deno.Conn;
  readonly #decoder = new HpackDecoder();
  #reading: Promise<void> = Promise.resolve();
  #writes: Promise<unknown> = Promise.resolve();
  /** The server's GOAWAY, once received. */
  goaway:
    | { readonly code: number; readonly lastStreamId: number; readonly debug: string }
    | undefined;
  /** RST_STREAM codes received, by stream. */
  readonly resets = new Map<number, number>();
  /** Header fields received (headers and trailers merged), by stream. */
  readonly answers = new Map<number, Map<string, string>>();
  /** Streams the server ended (END_STREAM or RST_STREAM). */
  readonly ended = new Set<number>();
  /** The connection ended (the server closed it or reset it, or we closed it). */
  closed = false;
  /** A write failed (the server closed or reset the connection). */
  writeFailed = false;
  /** The server's SETTINGS arrived (it accepted the connection and read nothing wrong yet). */
  serverSettings = false;
  /** What we may still send on the connection, from the server's grants (can go negative). */
  connWindow = DEFAULT_WINDOW;
  /** Everything the server allowed on the connection: its initial window and WINDOW_UPDATEs. */
  granted = DEFAULT_WINDOW;
  /** Bytes of DATA payload we sent. */
  sentData = 0;
  #initialStreamWindow = DEFAULT_WINDOW;
  readonly #streamWindows = new Map<number, number>();
  #closedByUs = false;
  #pingsSent = 0;
  readonly #pingAcks = new Set<number>();

  private constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /**
   * Connect to the unix socket `socket` and send the connection preface (before anything else:
   * an acknowledgement of the server's SETTINGS must not come first).
   */
  static async connect(socket: string): Promise<RawHttp2> {
    const c = new RawHttp2(await Deno.connect({ transport: "unix", path: socket }));
    await c.send(PREFACE, settingsFrame([]));
    c.#reading = c.#read();
    return c;
  }

  /** Write frames (or any bytes) after the writes before; false when the write failed. */
  send(...chunks: Uint8Array[]): Promise<boolean> {
    const sent = this.#writes.then(() => this.#write(chunks));
    this.#writes = sent;
    return sent;
  }

  async #write(chunks: Uint8Array[]): Promise<boolean> {
    const total = chunks.reduce((n, c) => n + c.length, 0);
    const bytes = new Uint8Array(total);
    let o = 0;
    for (const c of chunks) {
      bytes.set(c, o);
      o += c.length;
    }
    try {
      let written = 0;
      while (written < bytes.length) written += await this.#conn.write(bytes.subarray(written));
      return true;
    } catch {
      this.writeFailed = true;
      return false;
    }
  }

  /** What we may still send on `streamId`, from the server's grants. */
  streamWindow(streamId: number): number {
    return this.#streamWindows.get(streamId) ?? this.#initialStreamWindow;
  }

  /** Send a DATA frame, counting it against our send windows (whether or not it fits). */
  sendData(streamId: number, payload: Uint8Array, flags = 0): Promise<boolean> {
    this.connWindow -= payload.length;
    this.#streamWindows.set(streamId, this.streamWindow(streamId) - payload.length);
    this.sentData += payload.length;
    return this.send(frame(FrameType.DATA, flags, streamId, payload));
  }

  /** Wait (bounded) until `check` holds, e.g. until a stream has ended or a GOAWAY came. */
  async until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
    await waitFor(what, check, { timeoutMs, intervalMs: 10 });
  }

  /**
   * Wait until the server has read everything sent so far (it answers frames in order: a PING's
   * acknowledgement comes after what was sent before it). Not between a HEADERS frame without
   * END_HEADERS and its CONTINUATION.
   */
  async roundTrip(timeoutMs = 30_000): Promise<void> {
    const n = ++this.#pingsSent;
    const payload = new Uint8Array(8);
    new DataView(payload.buffer).setUint32(4, n);
    await this.send(frame(FrameType.PING, 0, 0, payload));
    await this.until(`the answer to PING ${n}`, () => this.#pingAcks.has(n), timeoutMs);
  }

  /** Close the socket (the server sees EOF). */
  close(): void {
    if (this.#closedByUs) return;
    this.#closedByUs = true;
    this.closed = true;
    try {
      this.#conn.close();
    } catch { /* already closed */ }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
    await this.#reading;
  }

  async #read(): Promise<void> {
    let buf = new Uint8Array(0);
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(chunk);
        if (n === null) break;
        const joined = new Uint8Array(buf.length + n);
        joined.set(buf);
        joined.set(chunk.subarray(0, n), buf.length);
        buf = joined;
        let offset = 0;
        while (buf.length - offset >= FRAME_HEADER_BYTES) {
          const h = parseFrameHeader(buf, offset);
          if (buf.length - offset < FRAME_HEADER_BYTES + h.length) break;
          const start = offset + FRAME_HEADER_BYTES;
          this.#onFrame({ ...h, payload: buf.slice(start, start + h.length) });
          offset = start + h.length;
        }
        buf = buf.slice(offset);
      }
    } catch { /* reset by the server, or closed by us */ }
    this.closed = true;
  }

  #onFrame(f: RawFrame): void {
    switch (f.type) {
      case FrameType.HEADERS: {
        const fields = this.answers.get(f.streamId) ?? new Map<string, string>();
        for (const [n, v] of this.#decoder.decode(f.payload)) fields.set(n, v);
        this.answers.set(f.streamId, fields);
        if (f.flags & Flag.END_STREAM) this.ended.add(f.streamId);
        break;
      }
      case FrameType.DATA:
        if (f.flags & Flag.END_STREAM) this.ended.add(f.streamId);
        break;
      case FrameType.RST_STREAM:
        this.resets.set(f.streamId, readU32(f.payload, 0));
        this.ended.add(f.streamId);
        break;
      case FrameType.GOAWAY:
        this.goaway = {
          lastStreamId: readU32(f.payload, 0) & 0x7fff_ffff,
          code: readU32(f.payload, 4),
          debug: new TextDecoder().decode(f.payload.subarray(8)),
        };
        break;
      case FrameType.WINDOW_UPDATE: {
        const increment = readU32(f.payload, 0) & 0x7fff_ffff;
        if (f.streamId === 0) {
          this.connWindow += increment;
          this.granted += increment;
        } else {
          this.#streamWindows.set(f.streamId, this.streamWindow(f.streamId) + increment);
        }
        break;
      }
      case FrameType.SETTINGS:
        if (f.flags & Flag.ACK) break;
        this.serverSettings = true;
        for (let i = 0; i + 6 <= f.payload.length; i += 6) {
          const id = (f.payload[i]! << 8) | f.payload[i + 1]!;
          if (id === Setting.INITIAL_WINDOW_SIZE) {
            this.#initialStreamWindow = readU32(f.payload, i + 2);
          }
        }
        void this.send(settingsFrame([], true));
        break;
      case FrameType.PING:
        if (f.flags & Flag.ACK) this.#pingAcks.add(readU32(f.payload, 4));
        else void this.send(frame(FrameType.PING, Flag.ACK, 0, f.payload));
        break;
    }
  }
}

/**
 * Call `path` with `message` as the (unframed) request bytes and `extra` request headers;
 * resolves with the answer's headers and trailers (empty when the server closed without one).
 */
export async function rawGrpcCall(
  socket: string,
  path: string,
  message: Uint8Array,
  extra: readonly HeaderField[] = [],
  timeoutMs = 60_000,
): Promise<Map<string, string>> {
  await using c = await RawHttp2.connect(socket);
  await c.send(frame(FrameType.HEADERS, Flag.END_HEADERS, 1, grpcRequestHeaders(path, extra)));
  await c.sendData(1, grpcMessage(message), Flag.END_STREAM);
  await c.until(`the answer to ${path}`, () => c.ended.has(1) || c.closed, timeoutMs);
  return c.answers.get(1) ?? new Map();
}
