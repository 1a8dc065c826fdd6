/**
 * HTTP/2 framing (RFC 9113 §4, §6): frame types, flags, error codes, settings, the connection
 * preface, and building and parsing frames. Pure: no I/O.
 *
 * @module
 */

/** The client connection preface (RFC 9113 §3.4). */
export const PREFACE: Uint8Array = new TextEncoder().encode("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** Length of a frame header. */
export const FRAME_HEADER_BYTES = 9;

/** Frame types. */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

/** Frame flags (their meaning depends on the frame type). */
export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

/** Error codes of RST_STREAM and GOAWAY. */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

/** Settings identifiers. */
export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** The default (and smallest allowed) maximum frame payload. */
export const DEFAULT_MAX_FRAME_SIZE = 16_384;
/** The initial flow-control window of a connection and of each stream. */
export const DEFAULT_WINDOW = 65_535;
/** The largest flow-control window (2^31 - 1). */
export const MAX_WINDOW = 0x7fff_ffff;

/** A parsed frame header. */
export interface FrameHeader {
  readonly length: number;
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
}

/** Parse the 9-byte frame header at `offset`. */
export function parseFrameHeader(bytes: Uint8Array, offset = 0): FrameHeader {
  const b = bytes;
  const o = offset;
  return {
    length: (b[o]! << 16) | (b[o + 1]! << 8) | b[o + 2]!,
    type: b[o + 3]!,
    flags: b[o + 4]!,
    streamId: ((b[o + 5]! & 0x7f) << 24 | b[o + 6]! << 16 | b[o + 7]! << 8 | b[o + 8]!) >>> 0,
  };
}

/** A whole frame: header and payload. */
export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
  const n = payload.length;
  out[0] = (n >>> 16) & 0xff;
  out[1] = (n >>> 8) & 0xff;
  out[2] = n & 0xff;
  out[3] = type;
  out[4] = flags;
  new DataView(out.buffer).setUint32(5, streamId & 0x7fff_ffff);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** A 32-bit big-endian value. */
export function u32(value: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, value >>> 0);
  return out;
}

/** Read a 32-bit big-endian value. */
export function readU32(bytes: Uint8Array, offset: number): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(offset);
}

/** A SETTINGS frame with `entries` (`[id, value]`), or an ACK when `ack`. */
export function settingsFrame(
  entries: readonly (readonly [number, number])[],
  ack = false,
): Uint8Array {
  const payload = new Uint8Array(entries.length * 6);
  const view = new DataView(payload.buffer);
  entries.forEach(([id, value], i) => {
    view.setUint16(i * 6, id);
    view.setUint32(i * 6 + 2, value >>> 0);
  });
  return frame(FrameType.SETTINGS, ack ? Flag.ACK : 0, 0, payload);
}

/** A GOAWAY frame. */
export function goawayFrame(lastStreamId: number, code: number, debug = ""): Uint8Array {
  const text = new TextEncoder().encode(debug.slice(0, 256));
  const payload = new Uint8Array(8 + text.length);
  payload.set(u32(lastStreamId & 0x7fff_ffff), 0);
  payload.set(u32(code), 4);
  payload.set(text, 8);
  return frame(FrameType.GOAWAY, 0, 0, payload);
}

/** A RST_STREAM frame. */
export function rstStreamFrame(streamId: number, code: number): Uint8Array {
  return frame(FrameType.RST_STREAM, 0, streamId, u32(code));
}

/** A WINDOW_UPDATE frame. */
export function windowUpdateFrame(streamId: number, increment: number): Uint8Array {
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, u32(increment));
}

/**
 * The content of a padded frame payload (PADDED flag): the padding length byte and the padding
 * are removed. Returns undefined when the padding is longer than the payload (a protocol error).
 */
export function unpad(payload: Uint8Array, flags: number): Uint8Array | undefined {
  if (!(flags & Flag.PADDED)) return payload;
  if (payload.length < 1) return undefined;
  const pad = payload[0]!;
  if (pad >= payload.length) return undefined;
  return payload.subarray(1, payload.length - pad);
}
