/**
 * Kubelet-style target paths for csi-sanity.
 *
 * csi-sanity asks its `--csi.createmountpathcmd` hook for a directory `D` and then publishes at
 * `D/target` (the leaf is hard-coded in csi-test's `pkg/sanity`). Kubelet publishes at
 * `<root>/pods/<pod-uid>/volumes/kubernetes.io~csi/<pv>/mount`, and our node plugin refuses any
 * other shape (it derives the workload pod and the PV from the path). So:
 *
 * - `hooks/create_target.sh` makes, like kubelet before NodePublishVolume, the directory
 *   `D = <root>/pods/<new uid>/volumes/kubernetes.io~csi/<pv>` (mode 0750) and prints it;
 * - the proxy renames the leaf `target` to `mount` in the path fields of NodePublishVolume,
 *   NodeUnpublishVolume and NodeGetVolumeStats ({@link toKubeletRequest}), and nothing else;
 * - `hooks/check_path.sh` applies the same rename, so csi-sanity's "was the target created /
 *   removed" checks look at the path the node plugin really used.
 *
 * @module
 */

/** Path fields (protobuf field numbers) of the node requests that carry a target path. */
const PATH_FIELDS: Readonly<Record<string, number>> = {
  NodePublishVolume: 4, // target_path
  NodeUnpublishVolume: 2, // target_path
  NodeGetVolumeStats: 2, // volume_path
};

/** The kubelet target for a csi-sanity target under `kubeletRoot`, else the path unchanged. */
export function toKubeletTarget(kubeletRoot: string, path: string): string {
  const root = kubeletRoot.replace(/\/+$/, "");
  if (!path.startsWith(`${root}/pods/`)) return path;
  const rest = path.slice(root.length + "/pods/".length).split("/");
  if (
    rest.length === 5 && rest[1] === "volumes" && rest[2] === "kubernetes.io~csi" &&
    rest[4] === "target"
  ) {
    return `${root}/pods/${rest[0]}/volumes/kubernetes.io~csi/${rest[3]}/mount`;
  }
  return path;
}

/** Rewrite the target-path field of a node request (other methods: unchanged bytes). */
export function toKubeletRequest(
  kubeletRoot: string,
  method: string,
  request: Uint8Array,
): Uint8Array {
  const field = PATH_FIELDS[method];
  if (field === undefined) return request;
  return rewriteStringField(request, field, (p) => toKubeletTarget(kubeletRoot, p));
}

// ---- protobuf wire format (top-level fields only) -------------------------------------------

function readVarint(buf: Uint8Array, pos: number): [number, number] {
  let value = 0;
  let shift = 0;
  for (;;) {
    if (pos >= buf.length) throw new Error("truncated varint");
    const b = buf[pos++]!;
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return [value, pos];
    shift += 7;
    if (shift > 63) throw new Error("varint too long");
  }
}

function writeVarint(value: number): Uint8Array {
  const out: number[] = [];
  while (value > 0x7f) {
    out.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
  return Uint8Array.from(out);
}

interface Field {
  readonly number: number;
  readonly wireType: number;
  /** Whole field, tag included. */
  readonly start: number;
  readonly end: number;
  /** Payload of a length-delimited field. */
  readonly payload?: Uint8Array;
}

function* fields(buf: Uint8Array): Generator<Field> {
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    const [tag, afterTag] = readVarint(buf, pos);
    pos = afterTag;
    const number = Math.floor(tag / 8);
    const wireType = tag % 8;
    let payload: Uint8Array | undefined;
    switch (wireType) {
      case 0:
        pos = readVarint(buf, pos)[1];
        break;
      case 1:
        pos += 8;
        break;
      case 2: {
        const [len, afterLen] = readVarint(buf, pos);
        payload = buf.subarray(afterLen, afterLen + len);
        pos = afterLen + len;
        break;
      }
      case 5:
        pos += 4;
        break;
      default:
        throw new Error(`unsupported protobuf wire type ${wireType}`);
    }
    if (pos > buf.length) throw new Error("truncated protobuf message");
    yield { number, wireType, start, end: pos, ...(payload ? { payload } : {}) };
  }
}

/** The last value of string field `number` (proto3: last one wins), if present. */
export function readStringField(buf: Uint8Array, number: number): string | undefined {
  let out: string | undefined;
  for (const f of fields(buf)) {
    if (f.number === number && f.wireType === 2) out = new TextDecoder().decode(f.payload);
  }
  return out;
}

/** Replace every value of string field `number` by `fn(value)`; all other bytes are kept. */
export function rewriteStringField(
  buf: Uint8Array,
  number: number,
  fn: (value: string) => string,
): Uint8Array {
  const parts: Uint8Array[] = [];
  let changed = false;
  for (const f of fields(buf)) {
    if (f.number === number && f.wireType === 2) {
      const before = new TextDecoder().decode(f.payload);
      const after = fn(before);
      if (after !== before) {
        const bytes = new TextEncoder().encode(after);
        parts.push(writeVarint(number * 8 + 2), writeVarint(bytes.length), bytes);
        changed = true;
        continue;
      }
    }
    parts.push(buf.subarray(f.start, f.end));
  }
  if (!changed) return buf;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let pos = 0;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  return out;
}
