/**
 * A raw gRPC call over a unix socket with our own HTTP/2 framing, for requests no gRPC client
 * would send (a message that is not valid protobuf). Returns the status headers of the answer.
 *
 * @module
 */
import { encodeHeaders, HpackDecoder } from "../../src/csi/grpc/hpack.ts";
import {
  Flag,
  frame,
  FRAME_HEADER_BYTES,
  FrameType,
  parseFrameHeader,
  PREFACE,
  settingsFrame,
} from "../../src/csi/grpc/http2_frames.ts";

/** Call `path` with `message` as the (unframed) request bytes; resolves with the answer's headers. */
export async function rawGrpcCall(
  socket: string,
  path: string,
  message: Uint8Array,
): Promise<Map<string, string>> {
  const conn = await Deno.connect({ transport: "unix", path: socket });
  try {
    const body = new Uint8Array(5 + message.length);
    new DataView(body.buffer).setUint32(1, message.length);
    body.set(message, 5);
    const headers = encodeHeaders([
      [":method", "POST"],
      [":scheme", "http"],
      [":path", path],
      [":authority", "localhost"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
    ]);
    for (
      const b of [
        PREFACE,
        settingsFrame([]),
        frame(FrameType.HEADERS, Flag.END_HEADERS, 1, headers),
        frame(FrameType.DATA, Flag.END_STREAM, 1, body),
      ]
    ) await conn.write(b);
    const decoder = new HpackDecoder();
    const out = new Map<string, string>();
    let buf = new Uint8Array(0);
    const chunk = new Uint8Array(65536);
    for (;;) {
      while (buf.length >= FRAME_HEADER_BYTES) {
        const h = parseFrameHeader(buf);
        if (buf.length < FRAME_HEADER_BYTES + h.length) break;
        const payload = buf.slice(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + h.length);
        buf = buf.slice(FRAME_HEADER_BYTES + h.length);
        if (h.type === FrameType.HEADERS && h.streamId === 1) {
          for (const [n, v] of decoder.decode(payload)) out.set(n, v);
          if (h.flags & Flag.END_STREAM) return out;
        }
      }
      const n = await conn.read(chunk);
      if (n === null) return out;
      const joined = new Uint8Array(buf.length + n);
      joined.set(buf);
      joined.set(chunk.subarray(0, n), buf.length);
      buf = joined;
    }
  } finally {
    conn.close();
  }
}
