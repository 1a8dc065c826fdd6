/**
 * JSON patch (RFC 6902, `application/json-patch+json`): add, remove, replace, move, copy, test.
 * Failures are {@link JsonPatchError}s; the router maps them to the real server's 422 / 400.
 *
 * @module
 */
import { clone, deepEqual, isObject } from "./json_value.ts";

/** An operation of a JSON patch document. */
export interface JsonPatchOp {
  /** Operation name. */
  readonly op: string;
  /** JSON pointer of the target. */
  readonly path: string;
  /** Value for add, replace and test. */
  readonly value?: unknown;
  /** Source pointer for move and copy. */
  readonly from?: string;
}

/** A JSON patch that cannot be applied. `testFailed` marks a failed `test` op. */
export class JsonPatchError extends Error {
  /** Error name. */
  override name = "JsonPatchError";
  /** Create an error; `testFailed` is true for a failing `test` op. */
  constructor(message: string, readonly testFailed = false) {
    super(message);
  }
}

function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw new JsonPatchError(`invalid JSON pointer: "${pointer}"`);
  return pointer.slice(1).split("/").map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
}

function parent(root: unknown, segs: string[], pointer: string): unknown {
  let cur = root;
  for (const s of segs.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(s)];
    else if (isObject(cur)) cur = cur[s];
    else cur = undefined;
    if (cur === undefined) throw new JsonPatchError(`doc is missing path: "${pointer}"`);
  }
  return cur;
}

function arrayIndex(arr: unknown[], seg: string, pointer: string, allowEnd: boolean): number {
  if (seg === "-" && allowEnd) return arr.length;
  if (!/^\d+$/.test(seg)) throw new JsonPatchError(`invalid array index in path: "${pointer}"`);
  const i = Number(seg);
  if (i > arr.length || (!allowEnd && i === arr.length)) {
    throw new JsonPatchError(`unable to access invalid index: ${i}`);
  }
  return i;
}

function getAt(root: unknown, pointer: string): unknown {
  const segs = parsePointer(pointer);
  if (segs.length === 0) return root;
  const p = parent(root, segs, pointer);
  const last = segs[segs.length - 1]!;
  if (Array.isArray(p)) return p[arrayIndex(p, last, pointer, false)];
  if (isObject(p) && Object.hasOwn(p, last)) return p[last];
  throw new JsonPatchError(`doc is missing key: ${pointer}`);
}

function removeAt(root: unknown, pointer: string): unknown {
  const segs = parsePointer(pointer);
  const p = parent(root, segs, pointer);
  const last = segs[segs.length - 1]!;
  if (Array.isArray(p)) return p.splice(arrayIndex(p, last, pointer, false), 1)[0];
  if (isObject(p) && Object.hasOwn(p, last)) {
    const v = p[last];
    delete p[last];
    return v;
  }
  throw new JsonPatchError(`unable to remove nonexistent key: ${last}: missing value`);
}

function addAt(root: unknown, pointer: string, value: unknown, replace: boolean): unknown {
  const segs = parsePointer(pointer);
  if (segs.length === 0) return value;
  const p = parent(root, segs, pointer);
  const last = segs[segs.length - 1]!;
  if (Array.isArray(p)) {
    const i = arrayIndex(p, last, pointer, !replace);
    if (replace) p[i] = value;
    else p.splice(i, 0, value);
  } else if (isObject(p)) {
    if (replace && !Object.hasOwn(p, last)) {
      throw new JsonPatchError(`replace operation does not apply: doc is missing key: ${pointer}`);
    }
    p[last] = value;
  } else throw new JsonPatchError(`doc is missing path: "${pointer}"`);
  return root;
}

/** Apply the operations in order to a copy of `target`. */
export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) {
    throw new JsonPatchError(
      "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
    );
  }
  let doc = clone(target);
  for (const raw of ops as JsonPatchOp[]) {
    if (!isObject(raw) || typeof raw.path !== "string") {
      throw new JsonPatchError("invalid patch operation");
    }
    switch (raw.op) {
      case "add":
        doc = addAt(doc, raw.path, clone(raw.value), false);
        break;
      case "replace":
        doc = addAt(doc, raw.path, clone(raw.value), true);
        break;
      case "remove":
        removeAt(doc, raw.path);
        break;
      case "move": {
        const v = removeAt(doc, raw.from ?? "");
        doc = addAt(doc, raw.path, v, false);
        break;
      }
      case "copy":
        doc = addAt(doc, raw.path, clone(getAt(doc, raw.from ?? "")), false);
        break;
      case "test":
        if (!deepEqual(getAt(doc, raw.path), raw.value)) {
          throw new JsonPatchError(`testing value ${raw.path} failed: test failed`, true);
        }
        break;
      default:
        throw new JsonPatchError(`Unexpected kind: ${raw.op}`);
    }
  }
  return doc;
}
