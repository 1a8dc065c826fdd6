/**
 * Field sets of server-side apply: the set of paths a manager owns, converted to and from the
 * `FieldsV1` wire form of `metadata.managedFields` (`f:<field>`, `k:{"name":"main"}`, `v:<value>`,
 * `"."` for the item itself).
 *
 * A path is a list of segments; a {@link FieldSet} stores them JSON-encoded so it can be a `Set`.
 *
 * @module
 */
import { deepEqual, isObject, type JsonObject } from "./json_value.ts";

/** Finds the list-map keys of a list field from the field names leading to it (undefined = not a map). */
export type ListKeyFn = (names: readonly string[]) => readonly string[] | undefined;

/** Set of encoded paths. */
export type FieldSet = Set<string>;

/** Top-level and metadata fields that are never owned. */
const SYSTEM_META: ReadonlySet<string> = new Set([
  "name",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "managedFields",
  "selfLink",
  "generateName",
]);

/** Encode a path for a {@link FieldSet}. */
export function encodePath(path: readonly string[]): string {
  return JSON.stringify(path);
}

/** Decode a path of a {@link FieldSet}. */
export function decodePath(encoded: string): string[] {
  return JSON.parse(encoded) as string[];
}

function itemKey(item: unknown, keys: readonly string[]): string {
  const o: JsonObject = {};
  for (const k of keys) if (isObject(item)) o[k] = item[k];
  return `k:${JSON.stringify(o)}`;
}

/**
 * The leaf paths (plus list-map item paths) present in `obj`, excluding system metadata,
 * `apiVersion`, `kind` and (when `withStatus` is false) `status`.
 */
export function fieldSetOf(obj: JsonObject, listKeys: ListKeyFn, withStatus = false): FieldSet {
  const out: FieldSet = new Set();
  const walk = (v: unknown, path: string[], names: string[]) => {
    if (isObject(v)) {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined);
      if (entries.length === 0 && path.length > 0) out.add(encodePath(path));
      for (const [k, x] of entries) {
        if (
          path.length === 0 &&
          (k === "apiVersion" || k === "kind" || (k === "status" && !withStatus))
        ) {
          continue;
        }
        if (path.length === 1 && path[0] === "f:metadata" && SYSTEM_META.has(k)) continue;
        walk(x, [...path, `f:${k}`], [...names, k]);
      }
      return;
    }
    if (Array.isArray(v)) {
      const keys = listKeys(names);
      if (keys && keys.length === 0) {
        for (const x of v) out.add(encodePath([...path, `v:${JSON.stringify(x)}`]));
        return;
      }
      if (keys && v.every(isObject)) {
        for (const item of v) {
          const p = [...path, itemKey(item, keys)];
          out.add(encodePath(p));
          walk(item, p, names);
        }
        return;
      }
    }
    out.add(encodePath(path));
  };
  walk(obj, [], []);
  return out;
}

/** Render a set as the nested `fieldsV1` object. */
export function toFieldsV1(set: FieldSet): JsonObject {
  const root: JsonObject = {};
  const sorted = [...set].map(decodePath).sort((a, b) => a.length - b.length);
  for (const path of sorted) {
    let cur = root;
    for (const seg of path) {
      if (!isObject(cur[seg])) cur[seg] = {};
      cur = cur[seg] as JsonObject;
    }
    if (
      sorted.some((p) =>
        p.length > path.length && encodePath(p.slice(0, path.length)) === encodePath(path)
      )
    ) {
      cur["."] = {};
    }
  }
  return root;
}

/** Parse a `fieldsV1` object into a set. */
export function fromFieldsV1(fields: unknown): FieldSet {
  const out: FieldSet = new Set();
  const walk = (node: unknown, path: string[]) => {
    if (!isObject(node)) return;
    const keys = Object.keys(node);
    if (keys.length === 0 && path.length > 0) {
      out.add(encodePath(path));
      return;
    }
    for (const k of keys) {
      if (k === ".") out.add(encodePath(path));
      else walk(node[k], [...path, k]);
    }
  };
  walk(fields, []);
  return out;
}

function matchesKey(item: unknown, seg: string): boolean {
  const want = JSON.parse(seg.slice(2)) as JsonObject;
  return isObject(item) && Object.entries(want).every(([k, v]) => deepEqual(item[k], v));
}

/** The value at a path, or undefined. */
export function valueAt(obj: unknown, path: readonly string[]): unknown {
  let cur = obj;
  for (const seg of path) {
    if (seg.startsWith("f:")) cur = isObject(cur) ? cur[seg.slice(2)] : undefined;
    else if (seg.startsWith("k:")) {
      cur = Array.isArray(cur) ? cur.find((i) => matchesKey(i, seg)) : undefined;
    } else if (seg.startsWith("v:")) {
      const v = JSON.parse(seg.slice(2));
      cur = Array.isArray(cur) && cur.some((x) => deepEqual(x, v)) ? v : undefined;
    } else return undefined;
    if (cur === undefined) return undefined;
  }
  return cur;
}

/** Remove the value at a path (a map key, a list-map item or a set element). */
export function removeAt(obj: JsonObject, path: readonly string[]): void {
  const parent = valueAt(obj, path.slice(0, -1));
  const seg = path[path.length - 1];
  if (!seg) return;
  if (seg.startsWith("f:") && isObject(parent)) delete parent[seg.slice(2)];
  else if (Array.isArray(parent)) {
    const idx = seg.startsWith("k:")
      ? parent.findIndex((i) => matchesKey(i, seg))
      : parent.findIndex((x) => deepEqual(x, JSON.parse(seg.slice(2))));
    if (idx >= 0) parent.splice(idx, 1);
  }
}

/** Human form of a path for conflict messages, e.g. `.spec.containers[name="main"].image`. */
export function displayPath(path: readonly string[]): string {
  return path.map((seg) => {
    if (seg.startsWith("f:")) return `.${seg.slice(2)}`;
    if (seg.startsWith("k:")) {
      const o = JSON.parse(seg.slice(2)) as JsonObject;
      return `[${Object.entries(o).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(",")}]`;
    }
    return `[=${seg.slice(2)}]`;
  }).join("");
}
