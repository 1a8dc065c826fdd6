import assert from "node:assert/strict";
import { encodeHeaders, type HeaderField, HpackDecoder } from "./hpack.ts";
import {
  ErrorCode,
  Flag,
  frame,
  FRAME_HEADER_BYTES,
  FrameType,
  parseFrameHeader,
  PREFACE,
  readU32,
  rstStreamFrame,
  Setting,
  settingsFrame,
  u32,
  windowUpdateFrame,
} from "./http2_frames.ts";
import type { Http2Transport } from "./http2_connection.ts";
import type { LimitEvent } from "./limits.ts";
import {
  CallCancelledError,
  DeadlineExceededError,
  encodeGrpcMessage,
  type GrpcCall,
  GrpcServer,
  type GrpcServerOptions,
  GrpcStatusError,
  parseGrpcTimeout,
  type UnaryHandler,
} from "./grpc_server.ts";

interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Uint8Array;
}

/** An in-memory client side of one connection, speaking raw frames. */
class Peer {
  #toServer: Uint8Array[] = [];
  #serverWaiter: (() => void) | undefined;
  #fromServer = new Uint8Array(0);
  #clientWaiter: (() => void) | undefined;
  #serverClosed = false;
  #clientClosed = false;
  readonly decoder = new HpackDecoder();
  readonly transport: Http2Transport;
  #stalled: (() => void)[] = [];

  /** `stallWrites`: the client never reads (the server's writes never complete). */
  constructor(options: { stallWrites?: boolean } = {}) {
    this.transport = {
      read: async (p) => {
        while (this.#toServer.length === 0) {
          if (this.#clientClosed || this.#serverClosed) return null;
          await new Promise<void>((r) => (this.#serverWaiter = r));
        }
        const next = this.#toServer[0]!;
        const n = Math.min(p.length, next.length);
        p.set(next.subarray(0, n));
        if (n === next.length) this.#toServer.shift();
        else this.#toServer[0] = next.subarray(n);
        return n;
      },
      write: (p) => {
        if (this.#serverClosed || this.#clientClosed) return Promise.reject(new Error("closed"));
        if (options.stallWrites) {
          return new Promise((_, reject) => this.#stalled.push(() => reject(new Error("closed"))));
        }
        const joined = new Uint8Array(this.#fromServer.length + p.length);
        joined.set(this.#fromServer);
        joined.set(p, this.#fromServer.length);
        this.#fromServer = joined;
        this.#clientWaiter?.();
        return Promise.resolve(p.length);
      },
      close: () => {
        for (const fail of this.#stalled.splice(0)) fail();
        this.#serverClosed = true;
        this.#serverWaiter?.();
        this.#clientWaiter?.();
      },
    };
  }

  get serverClosed(): boolean {
    return this.#serverClosed;
  }

  send(...bytes: Uint8Array[]): void {
    this.#toServer.push(...bytes);
    this.#serverWaiter?.();
  }

  /** The client goes away (EOF for the server). */
  close(): void {
    this.#clientClosed = true;
    this.#serverWaiter?.();
  }

  /** The next frame from the server, or undefined when it closed. */
  async next(): Promise<Frame | undefined> {
    for (;;) {
      if (this.#fromServer.length >= FRAME_HEADER_BYTES) {
        const h = parseFrameHeader(this.#fromServer);
        if (this.#fromServer.length >= FRAME_HEADER_BYTES + h.length) {
          const payload = this.#fromServer.slice(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + h.length);
          this.#fromServer = this.#fromServer.slice(FRAME_HEADER_BYTES + h.length);
          return { type: h.type, flags: h.flags, streamId: h.streamId, payload };
        }
      }
      if (this.#serverClosed) return undefined;
      await new Promise<void>((r) => (this.#clientWaiter = r));
    }
  }

  /** The next frame of `type` (others skipped, SETTINGS acked). */
  async expect(type: number): Promise<Frame> {
    for (;;) {
      const f = await this.next();
      if (!f) throw new Error(`connection closed while waiting for frame type ${type}`);
      if (f.type === type) return f;
    }
  }

  handshake(settings: (readonly [number, number])[] = []): void {
    this.send(PREFACE, settingsFrame(settings));
  }

  request(
    streamId: number,
    path: string,
    message: Uint8Array | undefined,
    extra: HeaderField[] = [],
  ) {
    const headers = encodeHeaders([
      [":method", "POST"],
      [":scheme", "http"],
      [":path", path],
      [":authority", "localhost"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ...extra,
    ]);
    if (message === undefined) {
      this.send(frame(FrameType.HEADERS, Flag.END_HEADERS, streamId, headers));
      return;
    }
    const body = new Uint8Array(5 + message.length);
    new DataView(body.buffer).setUint32(1, message.length);
    body.set(message, 5);
    this.send(
      frame(FrameType.HEADERS, Flag.END_HEADERS, streamId, headers),
      frame(FrameType.DATA, Flag.END_STREAM, streamId, body),
    );
  }

  /** Collect one response: headers, data, trailers (or trailers-only). */
  async response(streamId: number): Promise<{ headers: Map<string, string>; body: Uint8Array }> {
    const headers = new Map<string, string>();
    const chunks: Uint8Array[] = [];
    for (;;) {
      const f = await this.next();
      if (!f) throw new Error("connection closed before the response ended");
      if (f.streamId !== streamId) continue;
      if (f.type === FrameType.HEADERS) {
        for (const [n, v] of this.decoder.decode(f.payload)) headers.set(n, v);
      } else if (f.type === FrameType.DATA) {
        chunks.push(f.payload);
      } else if (f.type === FrameType.RST_STREAM) {
        headers.set("rst", String(readU32(f.payload, 0)));
        break;
      }
      if (f.flags & Flag.END_STREAM) break;
    }
    const total = chunks.reduce((n, c) => n + c.length, 0);
    const body = new Uint8Array(total);
    let o = 0;
    for (const c of chunks) {
      body.set(c, o);
      o += c.length;
    }
    return { headers, body };
  }
}

const ECHO = "/test.Echo/Echo";
const SLOW = "/test.Echo/Slow";

function server(extra: Record<string, UnaryHandler> = {}, options: GrpcServerOptions = {}): {
  server: GrpcServer;
  calls: GrpcCall[];
} {
  const calls: GrpcCall[] = [];
  const methods = new Map<string, UnaryHandler>([
    [ECHO, (req, call) => {
      calls.push(call);
      return Promise.resolve(req);
    }],
    [SLOW, (_req, call) => {
      calls.push(call);
      return new Promise((_, reject) => {
        call.signal.addEventListener("abort", () => reject(call.signal.reason), { once: true });
      });
    }],
    ...Object.entries(extra),
  ]);
  return { server: new GrpcServer(methods, options), calls };
}

const bytes = (s: string) => new TextEncoder().encode(s);

Deno.test("grpc server: a unary call is answered with headers, the message and OK trailers", async () => {
  const { server: s } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, ECHO, bytes("hello"));
  const r = await peer.response(1);
  assert.equal(r.headers.get(":status"), "200");
  assert.equal(r.headers.get("content-type"), "application/grpc");
  assert.equal(r.headers.get("grpc-status"), "0");
  assert.deepEqual(r.body, Uint8Array.from([0, 0, 0, 0, 5, ...bytes("hello")]));
  peer.close();
  assert.equal((await done).reason, "eof");
});

Deno.test("grpc server: errors are trailers-only with the code and a percent-encoded message", async () => {
  const { server: s } = server({
    "/test.Echo/Fail": () => Promise.reject(new GrpcStatusError(3, 'bad "x"\n100%')),
    "/test.Echo/Throw": () => {
      throw new Error("boom");
    },
  });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, "/test.Echo/Fail", bytes(""));
  let r = await peer.response(1);
  assert.equal(r.headers.get("grpc-status"), "3");
  assert.equal(r.headers.get("grpc-message"), 'bad "x"%0A100%25');
  assert.equal(r.body.length, 0);
  peer.request(3, "/test.Echo/Throw", bytes(""));
  r = await peer.response(3);
  assert.equal(r.headers.get("grpc-status"), "13");
  assert.match(r.headers.get("grpc-message")!, /boom/);
  peer.request(5, "/test.Echo/Missing", bytes(""));
  r = await peer.response(5);
  assert.equal(r.headers.get("grpc-status"), "12");
  peer.close();
  await done;
});

Deno.test("grpc server: a client RST_STREAM aborts the handler's signal and frees the stream", async () => {
  const { server: s, calls } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, SLOW, bytes(""));
  while (calls.length === 0) await new Promise((r) => setTimeout(r, 1));
  peer.send(rstStreamFrame(1, ErrorCode.CANCEL));
  await new Promise<void>((r) => calls[0]!.signal.addEventListener("abort", () => r()));
  assert.ok(calls[0]!.signal.reason instanceof CallCancelledError);
  // The connection still serves.
  peer.request(3, ECHO, bytes("x"));
  assert.equal((await peer.response(3)).headers.get("grpc-status"), "0");
  peer.close();
  await done;
  assert.equal(s.activeCalls, 0);
});

Deno.test("grpc server: the client going away mid-call aborts the handler", async () => {
  const { server: s, calls } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, SLOW, bytes(""));
  while (calls.length === 0) await new Promise((r) => setTimeout(r, 1));
  peer.close();
  assert.equal((await done).reason, "eof");
  assert.ok(calls[0]!.signal.aborted);
});

Deno.test("grpc server: grpc-timeout answers DEADLINE_EXCEEDED and aborts the handler", async () => {
  const { server: s, calls } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, SLOW, bytes(""), [["grpc-timeout", "20m"]]);
  const r = await peer.response(1);
  assert.equal(r.headers.get("grpc-status"), "4");
  assert.ok(calls[0]!.signal.reason instanceof DeadlineExceededError);
  assert.ok(calls[0]!.deadline !== undefined);
  peer.close();
  await done;
});

Deno.test("grpc server: a message above the limit is RESOURCE_EXHAUSTED", async () => {
  const { server: s } = server({}, { maxReceiveBytes: 10 });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, ECHO, bytes("x".repeat(100)));
  const r = await peer.response(1);
  assert.equal(r.headers.get("grpc-status"), "8");
  peer.close();
  await done;
});

Deno.test("grpc server: malformed gRPC framing and wrong content types are refused", async () => {
  const { server: s } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  const headers = (ct: string) =>
    encodeHeaders([[":method", "POST"], [":path", ECHO], [":scheme", "http"], [
      "content-type",
      ct,
    ]]);
  peer.send(
    frame(FrameType.HEADERS, Flag.END_HEADERS, 1, headers("application/grpc")),
    frame(FrameType.DATA, Flag.END_STREAM, 1, Uint8Array.from([0, 0, 0, 0, 9, 1])),
  );
  assert.equal((await peer.response(1)).headers.get("grpc-status"), "13");
  peer.send(frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 3, headers("text/html")));
  assert.equal((await peer.response(3)).headers.get(":status"), "415");
  peer.request(5, ECHO, undefined, [["grpc-timeout", "soon"]]);
  peer.send(frame(FrameType.DATA, Flag.END_STREAM, 5, Uint8Array.from([0, 0, 0, 0, 0])));
  assert.equal((await peer.response(5)).headers.get("grpc-status"), "13");
  peer.close();
  await done;
});

Deno.test("grpc server: protocol violations end the connection with GOAWAY, never an exception", async () => {
  const cases: [string, Uint8Array[], number][] = [
    ["garbage preface", [bytes("GET / HTTP/1.1\r\n\r\n")], ErrorCode.PROTOCOL_ERROR],
    [
      "first frame not SETTINGS",
      [PREFACE, frame(FrameType.PING, 0, 0, new Uint8Array(8))],
      ErrorCode.PROTOCOL_ERROR,
    ],
    ["bad HPACK", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.HEADERS, Flag.END_HEADERS, 1, Uint8Array.from([0xff, 0xff, 0xff])),
    ], ErrorCode.COMPRESSION_ERROR],
    ["oversized frame", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.DATA, 0, 1, new Uint8Array(20_000)),
    ], ErrorCode.FRAME_SIZE_ERROR],
    ["DATA on an idle stream", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.DATA, 0, 7, bytes("x")),
    ], ErrorCode.PROTOCOL_ERROR],
    ["even stream id", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.HEADERS, Flag.END_HEADERS, 2, encodeHeaders([])),
    ], ErrorCode.PROTOCOL_ERROR],
    ["CONTINUATION expected", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.HEADERS, 0, 1, encodeHeaders([])),
      frame(FrameType.PING, 0, 0, new Uint8Array(8)),
    ], ErrorCode.PROTOCOL_ERROR],
    ["bad SETTINGS size", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.SETTINGS, 0, 0, new Uint8Array(5)),
    ], ErrorCode.FRAME_SIZE_ERROR],
    [
      "window overflow",
      [PREFACE, settingsFrame([]), windowUpdateFrame(0, 0x7fff_ffff)],
      ErrorCode.FLOW_CONTROL_ERROR,
    ],
    ["PUSH_PROMISE", [
      PREFACE,
      settingsFrame([]),
      frame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 1, u32(2)),
    ], ErrorCode.PROTOCOL_ERROR],
  ];
  for (const [name, input, code] of cases) {
    const { server: s } = server();
    const peer = new Peer();
    const done = s.serveConnection(peer.transport);
    peer.send(...input);
    const goaway = await peer.expect(FrameType.GOAWAY);
    assert.equal(readU32(goaway.payload, 4), code, name);
    assert.equal((await done).reason, "error", name);
  }
});

Deno.test("grpc server: streams above the concurrency limit are refused, the rest served", async () => {
  const { server: s, calls } = server({}, { connection: { maxConcurrentStreams: 2 } });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, SLOW, bytes(""));
  peer.request(3, SLOW, bytes(""));
  peer.request(5, SLOW, bytes(""));
  const rst = await peer.expect(FrameType.RST_STREAM);
  assert.equal(rst.streamId, 5);
  assert.equal(readU32(rst.payload, 0), ErrorCode.REFUSED_STREAM);
  assert.equal(calls.length, 2);
  peer.close();
  await done;
});

Deno.test("grpc server: a response bigger than the client's window waits for WINDOW_UPDATE", async () => {
  const { server: s } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake([[Setting.INITIAL_WINDOW_SIZE, 10]]);
  peer.request(1, ECHO, bytes("0123456789abcdefghij")); // 25 bytes framed
  const first = await peer.expect(FrameType.DATA);
  assert.equal(first.payload.length, 10);
  peer.send(windowUpdateFrame(1, 100));
  const r = await peer.response(1);
  assert.equal(first.payload.length + r.body.length, 25);
  assert.equal(r.headers.get("grpc-status"), "0");
  peer.close();
  await done;
});

Deno.test("grpc server: PING is answered and a client GOAWAY closes once calls are answered", async () => {
  const { server: s } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.send(frame(FrameType.PING, 0, 0, bytes("12345678")));
  const pong = await peer.expect(FrameType.PING);
  assert.equal(pong.flags & Flag.ACK, Flag.ACK);
  peer.request(1, ECHO, bytes("x"));
  peer.send(frame(FrameType.GOAWAY, 0, 0, new Uint8Array(8)));
  assert.equal((await peer.response(1)).headers.get("grpc-status"), "0");
  await done;
  assert.ok(peer.serverClosed);
});

Deno.test("grpc server: shutdown() sends GOAWAY and ends calls still running after the grace", async () => {
  const { server: s, calls } = server();
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, SLOW, bytes(""));
  while (calls.length === 0) await new Promise((r) => setTimeout(r, 1));
  await s.shutdown(10);
  assert.ok(calls[0]!.signal.aborted);
  await done;
  assert.equal(s.connections, 0);
});

Deno.test("grpc server: parseGrpcTimeout() and encodeGrpcMessage()", () => {
  assert.equal(parseGrpcTimeout("119999m"), 119_999);
  assert.equal(parseGrpcTimeout("2S"), 2000);
  assert.equal(parseGrpcTimeout("1H"), 3_600_000);
  assert.equal(parseGrpcTimeout("5000u"), 5);
  assert.equal(parseGrpcTimeout("123456789m"), undefined);
  assert.equal(parseGrpcTimeout("-1S"), undefined);
  assert.equal(encodeGrpcMessage("é%\n"), "%C3%A9%25%0A");
});

Deno.test("grpc server: an idle connection is closed with GOAWAY only when an idle timeout is set", async () => {
  const { server: s } = server({}, { connection: { idleTimeoutMs: 20 } });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.request(1, ECHO, bytes("x"));
  assert.equal((await peer.response(1)).headers.get("grpc-status"), "0");
  const goaway = await peer.expect(FrameType.GOAWAY);
  assert.equal(readU32(goaway.payload, 0), 1, "last stream id");
  assert.equal((await done).reason, "timeout");
});

// ------------------------------------------------------------------ limits (ADR 0008, limits.ts)

/** What the server granted a peer, from the frames it read. */
class Grants {
  conn = 65_535;
  /** Everything granted on the connection: the initial window and the WINDOW_UPDATEs. */
  total = 65_535;
  readonly streams = new Map<number, number>();
  readonly resets = new Map<number, number>();
  goaway: number | undefined;
  closed = false;

  stream(id: number): number {
    return this.streams.get(id) ?? 65_535;
  }

  apply(f: Frame | undefined): void {
    if (!f) {
      this.closed = true;
      return;
    }
    if (f.type === FrameType.WINDOW_UPDATE) {
      const increment = readU32(f.payload, 0);
      if (f.streamId === 0) {
        this.conn += increment;
        this.total += increment;
      } else {
        this.streams.set(f.streamId, this.stream(f.streamId) + increment);
      }
    } else if (f.type === FrameType.RST_STREAM) {
      this.resets.set(f.streamId, readU32(f.payload, 0));
    } else if (f.type === FrameType.GOAWAY) {
      this.goaway = readU32(f.payload, 4);
    }
  }
}

/**
 * Open `streams` requests whose bodies never end and send `bytesEach` on each, only as far as the
 * server's windows allow (reading its frames while stalled), until every stream is reset or the
 * connection ends. `observe` runs after every step (to sample the server's held bytes).
 */
async function sendWithinWindows(
  peer: Peer,
  streams: number[],
  bytesEach: number,
  observe: () => void,
): Promise<{ sent: number; sentBeforeReset: number; grants: Grants }> {
  const g = new Grants();
  const left = new Map(streams.map((id) => [id, bytesEach]));
  for (const id of streams) peer.request(id, ECHO, undefined);
  let sent = 0;
  let sentBeforeReset: number | undefined;
  while (!g.closed && g.goaway === undefined && streams.some((id) => !g.resets.has(id))) {
    if (g.resets.size > 0) sentBeforeReset ??= sent;
    let progressed = false;
    for (const id of streams) {
      const n = Math.min(16_384, g.conn, g.stream(id), left.get(id)!);
      if (g.resets.has(id) || n <= 0) continue;
      peer.send(frame(FrameType.DATA, 0, id, new Uint8Array(n)));
      g.conn -= n;
      g.streams.set(id, g.stream(id) - n);
      left.set(id, left.get(id)! - n);
      sent += n;
      progressed = true;
    }
    await new Promise((r) => setTimeout(r, 0)); // let the server read
    observe();
    if (!progressed) g.apply(await peer.next());
  }
  return { sent, sentBeforeReset: sentBeforeReset ?? sent, grants: g };
}

Deno.test("grpc limits: a peer that sends beyond its flow-control window gets FLOW_CONTROL_ERROR", async () => {
  const { server: s } = server({}, {
    maxReceiveBytes: 100_000,
    connection: { maxBufferedBytes: 200_000 },
  });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  // Four bodies of 60,000 bytes (each within its stream's window), ignoring the connection's:
  // 240,000 bytes, more than the 200,000 the connection may hold.
  const streams = [1, 3, 5, 7];
  for (const id of streams) peer.request(id, ECHO, undefined);
  for (let i = 0; i < 4; i++) {
    for (const id of streams) peer.send(frame(FrameType.DATA, 0, id, new Uint8Array(15_000)));
  }
  const g = new Grants();
  while (g.goaway === undefined && !g.closed) g.apply(await peer.next());
  assert.equal(g.goaway, ErrorCode.FLOW_CONTROL_ERROR);
  assert.ok(g.total <= 200_000, `granted ${g.total} bytes on the connection`);
  const end = await done;
  assert.equal(end.reason, "error");
  assert.match(end.detail!, /beyond the connection's flow-control window/);
  assert.equal(s.bufferedBytes, 0, "everything held was given back");
});

Deno.test("grpc limits: peers within their windows stall at the limits, and the request timeout frees them", async () => {
  const limits: string[] = [];
  const { server: s } = server({}, {
    maxReceiveBytes: 100_000,
    maxBufferedBytes: 250_000,
    connection: { maxBufferedBytes: 200_000, requestTimeoutMs: 300 },
    onLimit: (e: LimitEvent) => limits.push(e.detail),
  });
  let maxHeld = 0;
  const observe = () => (maxHeld = Math.max(maxHeld, s.bufferedBytes));
  const peers = [new Peer(), new Peer()];
  const served = peers.map((p) => s.serveConnection(p.transport));
  for (const p of peers) p.handshake();
  // Each connection wants 4 × 90,000 bytes (each body within the message limit): 360,000 bytes,
  // more than its 200,000; both together more than the server's 250,000.
  const results = await Promise.all(
    peers.map((p) => sendWithinWindows(p, [1, 3, 5, 7], 90_000, observe)),
  );
  for (const { sentBeforeReset, grants } of results) {
    assert.ok(sentBeforeReset <= 200_000, `one connection sent ${sentBeforeReset} bytes`);
    assert.equal(grants.goaway, undefined, "a peer within its windows is never cut off");
    assert.deepEqual([...grants.resets.values()], [8, 8, 8, 8], "CANCEL when the time is up");
  }
  assert.ok(maxHeld <= 250_000 + 2 * 65_535, `the server held up to ${maxHeld} bytes`);
  assert.ok(maxHeld > 150_000, `the limits, not the test, stopped the peers (${maxHeld})`);
  assert.equal(s.bufferedBytes, 0, "the reset streams gave their bytes back");
  assert.ok(limits.some((d) => /not complete within 300 ms/.test(d)), limits.join("\n"));
  // The windows reopened: the connections still serve.
  peers[0]!.request(9, ECHO, bytes("again"));
  assert.equal((await peers[0]!.response(9)).headers.get("grpc-status"), "0");
  for (const p of peers) p.close();
  await Promise.all(served);
});

Deno.test("grpc limits: a header block left unfinished ends the connection after the request timeout", async () => {
  const { server: s } = server({}, { connection: { requestTimeoutMs: 30 } });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  peer.send(frame(FrameType.HEADERS, 0, 1, encodeHeaders([[":method", "POST"]])));
  const goaway = await peer.expect(FrameType.GOAWAY);
  assert.equal(readU32(goaway.payload, 4), ErrorCode.ENHANCE_YOUR_CALM);
  assert.match(new TextDecoder().decode(goaway.payload.subarray(8)), /not complete within 30 ms/);
  assert.equal((await done).reason, "error");
});

Deno.test("grpc limits: above maxConnections the longest idle connection makes room; when all are busy a new one is refused", async () => {
  const limits: string[] = [];
  const { server: s, calls } = server({}, {
    maxConnections: 2,
    onLimit: (e: LimitEvent) => limits.push(`${e.kind}: ${e.detail}`),
  });
  const idle = new Peer();
  const busy = new Peer();
  const ends = [s.serveConnection(idle.transport), s.serveConnection(busy.transport)];
  idle.handshake();
  busy.handshake();
  busy.request(1, SLOW, bytes(""));
  while (calls.length === 0) await new Promise((r) => setTimeout(r, 1));
  // A third connection: the idle one is closed (GOAWAY NO_ERROR) to make room.
  const third = new Peer();
  ends.push(s.serveConnection(third.transport));
  const goaway = await idle.expect(FrameType.GOAWAY);
  assert.equal(readU32(goaway.payload, 4), ErrorCode.NO_ERROR);
  assert.equal(s.connections, 2);
  third.handshake();
  third.request(1, SLOW, bytes(""));
  while (calls.length < 2) await new Promise((r) => setTimeout(r, 1));
  // A fourth while both have a call in flight: refused, the others untouched.
  const fourth = new Peer();
  const refused = await s.serveConnection(fourth.transport);
  assert.equal(refused.reason, "error");
  const refusal = await fourth.expect(FrameType.GOAWAY);
  assert.equal(readU32(refusal.payload, 4), ErrorCode.ENHANCE_YOUR_CALM);
  assert.match(new TextDecoder().decode(refusal.payload.subarray(8)), /too many connections/);
  assert.ok(fourth.serverClosed);
  assert.equal(s.connections, 2);
  assert.equal(calls.filter((c) => c.signal.aborted).length, 0, "no call was cut");
  assert.equal(limits.length, 2, limits.join("\n"));
  assert.match(limits[0]!, /closed the connection idle the longest/);
  assert.match(limits[1]!, /refused a connection/);
  for (const p of [busy, third]) p.close();
  await Promise.all(ends);
});

Deno.test("grpc limits: a grpc-timeout beyond what a timer can wait is no deadline, not 1 ms", async () => {
  const { server: s, calls } = server({
    "/test.Echo/Later": (req, call) => {
      calls.push(call);
      return new Promise((r) => setTimeout(() => r(req), 30));
    },
  });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  // 99999999 hours, and 2147484 seconds (1 s above 2^31 - 1 ms): setTimeout would fire at once.
  for (const [id, timeout] of [[1, "99999999H"], [3, "2147484S"]] as const) {
    peer.request(id, "/test.Echo/Later", bytes("x"), [["grpc-timeout", timeout]]);
    const r = await peer.response(id);
    assert.equal(r.headers.get("grpc-status"), "0", timeout);
  }
  assert.deepEqual(calls.map((c) => c.deadline), [undefined, undefined]);
  // Just below the bound, a deadline is still a deadline.
  peer.request(5, SLOW, bytes(""), [["grpc-timeout", "2147483S"]]);
  while (calls.length < 3) await new Promise((r) => setTimeout(r, 1));
  assert.ok(calls[2]!.deadline! - performance.now() > 2_147_000_000);
  peer.close();
  await done;
});

Deno.test("grpc limits: handlers still running after a reset count against the stream limit and hold their request", async () => {
  const release: (() => void)[] = [];
  const { server: s } = server({
    // A handler that does not stop when its call is cancelled.
    "/test.Echo/Stubborn": (req) => new Promise((r) => release.push(() => r(req))),
  }, { connection: { maxConcurrentStreams: 2 } });
  const peer = new Peer();
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  for (const id of [1, 3]) {
    peer.request(id, "/test.Echo/Stubborn", new Uint8Array(1000));
    while (release.length < (id + 1) / 2) await new Promise((r) => setTimeout(r, 1));
    peer.send(rstStreamFrame(id, ErrorCode.CANCEL));
  }
  peer.request(5, ECHO, bytes("x"));
  const refused = await peer.expect(FrameType.RST_STREAM);
  assert.equal(refused.streamId, 5);
  assert.equal(readU32(refused.payload, 0), ErrorCode.REFUSED_STREAM);
  assert.ok(s.bufferedBytes >= 2000, `the two requests are still held (${s.bufferedBytes})`);
  for (const r of release) r();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(s.bufferedBytes, 0);
  peer.request(7, ECHO, bytes("x"));
  assert.equal((await peer.response(7)).headers.get("grpc-status"), "0");
  peer.close();
  await done;
});

Deno.test("grpc limits: a peer that never reads its answers stops being read, then is disconnected", async () => {
  const { server: s } = server({}, { connection: { requestTimeoutMs: 50 } });
  const peer = new Peer({ stallWrites: true });
  const done = s.serveConnection(peer.transport);
  peer.handshake();
  // 10,000 PINGs: 170,000 bytes of answers, more than the output the server lets wait.
  const ping = frame(FrameType.PING, 0, 0, bytes("12345678"));
  for (let i = 0; i < 10_000; i++) peer.send(ping);
  const end = await done;
  assert.equal(end.reason, "timeout");
  assert.match(end.detail!, /does not read its answers/);
});

Deno.test("grpc limits: limits that are not integers, or too small for one message, are refused", () => {
  const cases: GrpcServerOptions[] = [
    { maxConnections: Number.NaN },
    { maxConnections: 0 },
    { maxBufferedBytes: Number.NaN },
    { maxReceiveBytes: -1 },
    { maxReceiveBytes: 1000, maxBufferedBytes: 1000 }, // below one connection's limit
    // Connection limits are checked when the server is made too: a connection this small cannot
    // hold one message and its window; a NaN timeout would never fire.
    { maxReceiveBytes: 1000, connection: { maxBufferedBytes: 1000 } },
    { connection: { requestTimeoutMs: Number.NaN } },
    { connection: { maxConcurrentStreams: 0 } },
  ];
  for (const options of cases) {
    assert.throws(() => server({}, options), RangeError, JSON.stringify(options));
  }
});
