/**
 * Minimal decoder for the protobuf bodies that kubectl's typed generators send
 * (`kubectl create namespace|configmap|secret|serviceaccount`, as observed with kubectl 1.32): the
 * `k8s\0` magic, the `runtime.Unknown` envelope, `ObjectMeta` (name, generateName, namespace,
 * labels, annotations, finalizers) and the few kind-specific fields of those four kinds.
 * Other kinds are a 415, as documented in `docs/apiserver.md`. Responses stay JSON, which
 * kubectl accepts (`Accept: application/vnd.kubernetes.protobuf,application/json`).
 *
 * @module
 */
import type { JsonObject } from "./json_value.ts";

/** A body that is not a decodable Kubernetes protobuf object of a supported kind. */
export class ProtobufDecodeError extends Error {
  /** Error name. */
  override name = "ProtobufDecodeError";
}

const MAGIC = [0x6b, 0x38, 0x73, 0x00];
const decoder = new TextDecoder();

interface Field {
  readonly no: number;
  readonly varint?: number;
  readonly bytes?: Uint8Array;
}

function readFields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  let pos = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    while (true) {
      if (pos >= buf.length) throw new ProtobufDecodeError("truncated varint");
      const b = buf[pos++]!;
      result += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) return result;
      shift += 7;
    }
  };
  while (pos < buf.length) {
    const key = varint();
    const no = Math.floor(key / 8);
    switch (key & 7) {
      case 0:
        out.push({ no, varint: varint() });
        break;
      case 2: {
        const len = varint();
        if (pos + len > buf.length) throw new ProtobufDecodeError("truncated field");
        out.push({ no, bytes: buf.subarray(pos, pos + len) });
        pos += len;
        break;
      }
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      default:
        throw new ProtobufDecodeError(`unsupported wire type ${key & 7}`);
    }
  }
  return out;
}

function str(f: Field): string {
  return f.bytes ? decoder.decode(f.bytes) : "";
}

function base64(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Decode map entries (key = 1, value = 2) of field `no`. */
function mapOf(fields: Field[], no: number, asBytes = false): Record<string, string> | undefined {
  const entries = fields.filter((f) => f.no === no && f.bytes);
  if (!entries.length) return undefined;
  const out: Record<string, string> = {};
  for (const e of entries) {
    const kv = readFields(e.bytes!);
    const k = kv.find((x) => x.no === 1);
    const v = kv.find((x) => x.no === 2);
    out[k ? str(k) : ""] = v?.bytes ? (asBytes ? base64(v.bytes) : decoder.decode(v.bytes)) : "";
  }
  return out;
}

function objectMeta(buf: Uint8Array): JsonObject {
  const fields = readFields(buf);
  const m: JsonObject = {};
  const text = (no: number) => {
    const f = fields.find((x) => x.no === no);
    return f ? str(f) : "";
  };
  if (text(1)) m.name = text(1);
  if (text(2)) m.generateName = text(2);
  if (text(3)) m.namespace = text(3);
  const labels = mapOf(fields, 11);
  if (labels) m.labels = labels;
  const annotations = mapOf(fields, 12);
  if (annotations) m.annotations = annotations;
  const finalizers = fields.filter((f) => f.no === 14).map(str);
  if (finalizers.length) m.finalizers = finalizers;
  return m;
}

function bool(fields: Field[], no: number): boolean | undefined {
  const f = fields.find((x) => x.no === no && x.varint !== undefined);
  return f ? f.varint !== 0 : undefined;
}

/** Decode a `k8s\0`-framed protobuf object into its JSON form. */
export function decodeKubeProtobuf(body: Uint8Array): JsonObject {
  if (body.length < 4 || MAGIC.some((b, i) => body[i] !== b)) {
    throw new ProtobufDecodeError("missing k8s protobuf magic");
  }
  const envelope = readFields(body.subarray(4));
  const typeMeta = readFields(envelope.find((f) => f.no === 1)?.bytes ?? new Uint8Array());
  const apiVersion = str(typeMeta.find((f) => f.no === 1) ?? { no: 1 });
  const kind = str(typeMeta.find((f) => f.no === 2) ?? { no: 2 });
  const raw = readFields(envelope.find((f) => f.no === 2)?.bytes ?? new Uint8Array());
  const metaField = raw.find((f) => f.no === 1);
  const obj: JsonObject = {
    apiVersion,
    kind,
    metadata: metaField?.bytes ? objectMeta(metaField.bytes) : {},
  };
  const put = (key: string, value: unknown) => {
    if (value !== undefined) obj[key] = value;
  };
  switch (`${apiVersion}/${kind}`) {
    case "v1/Namespace":
      break;
    case "v1/ConfigMap":
      put("data", mapOf(raw, 2));
      put("binaryData", mapOf(raw, 3, true));
      put("immutable", bool(raw, 4));
      break;
    case "v1/Secret": {
      put("data", mapOf(raw, 2, true));
      const type = raw.find((f) => f.no === 3);
      if (type && str(type)) obj.type = str(type);
      put("stringData", mapOf(raw, 4));
      put("immutable", bool(raw, 5));
      break;
    }
    case "v1/ServiceAccount":
      put("automountServiceAccountToken", bool(raw, 4));
      break;
    default:
      throw new ProtobufDecodeError(`protobuf is not supported for ${apiVersion}, Kind=${kind}`);
  }
  return obj;
}
