/**
 * HPACK (RFC 7541), the header compression of HTTP/2, as much as a gRPC server needs:
 *
 * - {@link HpackDecoder}: the full decoder (static and dynamic table, every representation,
 *   Huffman-coded strings, table size updates), with limits on the table size and on the size of
 *   a decoded header list. Any malformed input is an {@link HpackError} (a connection error
 *   `COMPRESSION_ERROR`: the decoder's state is then unknown, so the connection must end).
 * - {@link encodeHeaders}: literals without indexing and without Huffman coding, so the encoder
 *   keeps no state and never grows the peer's table (answers are a handful of short headers).
 *
 * Names and values are byte strings; they are kept as latin-1 JavaScript strings (one char per
 * byte), so nothing is lost or re-encoded.
 *
 * @module
 */
import { HUFFMAN_CODES } from "./huffman_table.ts";
import { checkLimit } from "./limits.ts";

/** A malformed header block (a connection error of type `COMPRESSION_ERROR`). */
export class HpackError extends Error {
  override name = "HpackError";
}

/** A header field: `[name, value]`. */
export type HeaderField = readonly [string, string];

/** The static table (RFC 7541, Appendix A); index 1 is element 0. */
export const STATIC_TABLE: readonly HeaderField[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

/** The per-entry overhead counted in table and header-list sizes (RFC 7541 §4.1). */
const ENTRY_OVERHEAD = 32;
/**
 * Integers above this are refused (no legitimate header block needs them: string lengths are
 * bounded by the header list size, indexes by the tables, table sizes by our setting).
 */
export const MAX_INTEGER = 2 ** 28;
/**
 * Continuation bytes of one integer (7 bits each: 5 carry 35 bits, more than {@link MAX_INTEGER}).
 * A longer encoding is refused before its value is computed: a run of `0x80` bytes would
 * otherwise push the shift past 2^1023, where `0 * 2 ** shift` is `NaN`, and every `size > max`
 * check after it is false.
 */
export const MAX_INTEGER_CONTINUATION_BYTES = 5;
const EOS = 256;

// The Huffman decoding trie: node n has children at 2n (bit 0) and 2n+1 (bit 1); a child value
// below 0 is a leaf holding -(symbol + 1); 0 means "no such code".
const TRIE: Int32Array = (() => {
  const children: number[] = [0, 0];
  let nodes = 1;
  HUFFMAN_CODES.forEach(([code, bits], symbol) => {
    let node = 0;
    for (let i = bits - 1; i >= 0; i--) {
      const slot = 2 * node + ((code >>> i) & 1);
      if (i === 0) {
        children[slot] = -(symbol + 1);
      } else {
        if (children[slot] === 0 || children[slot] === undefined) {
          children[slot] = nodes;
          children[2 * nodes] = 0;
          children[2 * nodes + 1] = 0;
          nodes++;
        }
        node = children[slot]!;
      }
    }
  });
  return Int32Array.from(children);
})();

/** Bytes as a latin-1 string (one char per byte), in chunks that stay within call-argument limits. */
export function latin1(bytes: ArrayLike<number>): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    s += String.fromCharCode(...Array.prototype.slice.call(bytes, i, i + 4096) as number[]);
  }
  return s;
}

/** Decode a Huffman-coded string (RFC 7541 §5.2). @throws {HpackError} */
export function huffmanDecode(bytes: Uint8Array): string {
  const out: number[] = [];
  let node = 0;
  let depth = 0; // bits consumed since the last symbol
  let allOnes = true; // those bits were all 1 (a prefix of EOS: valid padding)
  for (const byte of bytes) {
    for (let i = 7; i >= 0; i--) {
      const bit = (byte >>> i) & 1;
      const next = TRIE[2 * node + bit]!;
      depth++;
      allOnes &&= bit === 1;
      if (next < 0) {
        const symbol = -next - 1;
        if (symbol === EOS) throw new HpackError("Huffman string contains EOS");
        out.push(symbol);
        node = 0;
        depth = 0;
        allOnes = true;
      } else if (next === 0) {
        throw new HpackError("Invalid Huffman code");
      } else {
        node = next;
      }
    }
  }
  if (depth > 7 || !allOnes) throw new HpackError("Invalid Huffman padding");
  return latin1(out);
}

/** Reads a header block. */
class Reader {
  #pos = 0;
  constructor(readonly bytes: Uint8Array) {}
  get done(): boolean {
    return this.#pos >= this.bytes.length;
  }
  peek(): number {
    return this.bytes[this.#pos]!;
  }
  /** An integer with an `n`-bit prefix (RFC 7541 §5.1). */
  integer(n: number): number {
    if (this.done) throw new HpackError("Truncated integer");
    const max = (1 << n) - 1;
    let value = this.bytes[this.#pos++]! & max;
    if (value < max) return value;
    for (let i = 0;; i++) {
      if (i >= MAX_INTEGER_CONTINUATION_BYTES) throw new HpackError("Integer encoding too long");
      if (this.done) throw new HpackError("Truncated integer");
      const b = this.bytes[this.#pos++]!;
      value += (b & 0x7f) * 2 ** (7 * i);
      // Written so that NaN fails too.
      if (!(value <= MAX_INTEGER)) throw new HpackError("Integer too large");
      if ((b & 0x80) === 0) return value;
    }
  }
  /** A string literal (RFC 7541 §5.2). */
  string(maxBytes: number): string {
    if (this.done) throw new HpackError("Truncated string");
    const huffman = (this.peek() & 0x80) !== 0;
    const length = this.integer(7);
    if (!(length <= maxBytes)) throw new HpackError("String too long");
    if (!(this.#pos + length <= this.bytes.length)) throw new HpackError("Truncated string");
    const raw = this.bytes.subarray(this.#pos, this.#pos + length);
    this.#pos += length;
    return huffman ? huffmanDecode(raw) : latin1(raw);
  }
}

/** Options of {@link HpackDecoder}. */
export interface HpackDecoderOptions {
  /** Our `SETTINGS_HEADER_TABLE_SIZE`. @default 4096 */
  readonly maxTableSize?: number;
  /** Largest decoded header list (RFC 7541 size: name + value + 32 per field). @default 65536 */
  readonly maxHeaderListSize?: number;
}

/** The HPACK decoder of one connection. */
export class HpackDecoder {
  readonly #settingMax: number;
  readonly #maxList: number;
  /** Dynamic table, newest first. */
  #table: HeaderField[] = [];
  #size = 0;
  #max: number;

  /** Create a decoder. */
  constructor(options: HpackDecoderOptions = {}) {
    this.#settingMax = checkLimit("HpackDecoder", "maxTableSize", options.maxTableSize ?? 4096);
    this.#max = this.#settingMax;
    this.#maxList = checkLimit(
      "HpackDecoder",
      "maxHeaderListSize",
      options.maxHeaderListSize ?? 65536,
    );
  }

  /** Current dynamic table size in RFC 7541 units (for tests). */
  get tableSize(): number {
    return this.#size;
  }

  /** Current dynamic table limit (the last table size update, at most our setting; for tests). */
  get tableLimit(): number {
    return this.#max;
  }

  #entry(index: number): HeaderField {
    if (index === 0) throw new HpackError("Index 0");
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]!;
    const e = this.#table[index - STATIC_TABLE.length - 1];
    if (!e) throw new HpackError(`Index ${index} is beyond the dynamic table`);
    return e;
  }

  #evict(): void {
    // `!(a <= b)`: a NaN anywhere evicts everything rather than nothing.
    while (this.#table.length > 0 && !(this.#size <= this.#max)) {
      const [n, v] = this.#table.pop()!;
      this.#size -= n.length + v.length + ENTRY_OVERHEAD;
    }
  }

  #insert(field: HeaderField): void {
    const size = field[0].length + field[1].length + ENTRY_OVERHEAD;
    if (!(size <= this.#max)) {
      this.#table = [];
      this.#size = 0;
      return;
    }
    this.#table.unshift(field);
    this.#size += size;
    this.#evict();
  }

  /**
   * Decode one complete header block (a HEADERS frame and its CONTINUATIONs).
   * @throws {HpackError} on any malformed input or when a limit is exceeded
   */
  decode(block: Uint8Array): HeaderField[] {
    const r = new Reader(block);
    const out: HeaderField[] = [];
    let listSize = 0;
    let sawField = false;
    const emit = (field: HeaderField) => {
      sawField = true;
      listSize += field[0].length + field[1].length + ENTRY_OVERHEAD;
      if (!(listSize <= this.#maxList)) throw new HpackError("Header list too large");
      out.push(field);
    };
    while (!r.done) {
      const b = r.peek();
      if (b & 0x80) {
        emit(this.#entry(r.integer(7)));
      } else if ((b & 0xc0) === 0x40) {
        const index = r.integer(6);
        const name = index === 0 ? r.string(this.#maxList) : this.#entry(index)[0];
        const field: HeaderField = [name, r.string(this.#maxList)];
        this.#insert(field);
        emit(field);
      } else if ((b & 0xe0) === 0x20) {
        if (sawField) throw new HpackError("Table size update after a header field");
        const size = r.integer(5);
        if (!(size <= this.#settingMax)) {
          throw new HpackError("Table size update above the limit");
        }
        this.#max = size;
        this.#evict();
      } else {
        // 0000xxxx literal without indexing, 0001xxxx never indexed: same decoding.
        const index = r.integer(4);
        const name = index === 0 ? r.string(this.#maxList) : this.#entry(index)[0];
        emit([name, r.string(this.#maxList)]);
      }
    }
    return out;
  }
}

function pushInteger(out: number[], value: number, prefixBits: number, first: number): void {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out.push(first | value);
    return;
  }
  out.push(first | max);
  let rest = value - max;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
}

function pushString(out: number[], s: string): void {
  pushInteger(out, s.length, 7, 0);
  for (let i = 0; i < s.length; i++) out.push(s.charCodeAt(i) & 0xff);
}

/**
 * Encode header fields as literals without indexing (no Huffman coding, no table state).
 * `tableSizeUpdate` puts a dynamic table size update first (to acknowledge a smaller table the
 * peer asked for: ours is always empty, so 0 is always right). `withIndexing` encodes literals
 * with incremental indexing instead, which the peer adds to its dynamic table (never used by the
 * server; tests use it to fill a decoder's table).
 */
export function encodeHeaders(
  fields: readonly HeaderField[],
  tableSizeUpdate?: number,
  withIndexing = false,
): Uint8Array {
  const out: number[] = [];
  if (tableSizeUpdate !== undefined) pushInteger(out, tableSizeUpdate, 5, 0x20);
  for (const [name, value] of fields) {
    out.push(withIndexing ? 0x40 : 0);
    pushString(out, name);
    pushString(out, value);
  }
  return Uint8Array.from(out);
}
