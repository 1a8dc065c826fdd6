/**
 * Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in kinds we use.
 * Lists are merged by the Kubernetes merge keys (containers by `name`, ports by `containerPort`,
 * …; see {@link mergeKeyFor}); other lists are atomic. Supported directives: `$patch: delete`
 * and `$patch: replace`, `$setElementOrder/<list>`, `$retainKeys`, `$deleteFromPrimitiveList/<list>`
 * and `null` deletion.
 *
 * @module
 */
import { clone, isObject, type JsonObject } from "./json_value.ts";

/** Merge key of a list field by its name, as in the 1.32 core types; undefined = atomic. */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  volumes: "name",
  imagePullSecrets: "name",
  schedulingGates: "name",
  resourceClaims: "name",
  hostAliases: "ip",
  topologySpreadConstraints: "topologyKey",
  ports: "containerPort",
  env: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  conditions: "type",
  podIPs: "ip",
  hostIPs: "ip",
  ownerReferences: "uid",
  containerStatuses: "name",
  initContainerStatuses: "name",
};

/** Primitive lists merged as sets. */
const SET_LISTS: ReadonlySet<string> = new Set(["finalizers"]);

/** The merge key of list field `name` (the last path segment), or undefined for atomic lists. */
export function mergeKeyFor(name: string): string | undefined {
  return MERGE_KEYS[name];
}

/** Whether list field `name` is a set of primitives. */
export function isSetList(name: string): boolean {
  return SET_LISTS.has(name);
}

function mergeList(field: string, target: unknown, patch: unknown[], order: unknown): unknown[] {
  const key = mergeKeyFor(field);
  const base = Array.isArray(target) ? target : [];
  if (isSetList(field)) {
    const out = [...base];
    for (const v of patch) if (!out.includes(v)) out.push(v);
    return out;
  }
  if (!key) return patch.filter((v) => !(isObject(v) && v.$patch)).map(clone);
  if (patch.some((v) => isObject(v) && v.$patch === "replace")) {
    return patch.filter((v) => !(isObject(v) && v.$patch === "replace")).map(clone);
  }
  let out = base.map(clone);
  for (const item of patch) {
    if (!isObject(item)) continue;
    const idx = out.findIndex((o) => isObject(o) && o[key] === item[key]);
    if (item.$patch === "delete") {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = strategicMerge(out[idx], item);
    else out.push(strategicMerge({}, item));
  }
  if (Array.isArray(order)) {
    const rank = (o: unknown) => {
      const i = order.findIndex((k) => isObject(k) && isObject(o) && k[key] === o[key]);
      return i < 0 ? order.length : i;
    };
    out = out.map((o, i) => ({ o, i })).sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i).map((
      x,
    ) => x.o);
  }
  return out;
}

/** Apply a strategic merge patch to a copy of `target`. */
export function strategicMerge(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  if (patch.$patch === "replace") {
    const { $patch: _, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch === "delete") return undefined;
  let out: JsonObject = isObject(target) ? { ...target } : {};
  if (Array.isArray(patch.$retainKeys)) {
    const keep = new Set(patch.$retainKeys as string[]);
    out = Object.fromEntries(Object.entries(out).filter(([k]) => keep.has(k)));
  }
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$setElementOrder/") || k === "$retainKeys" || k === "$patch") continue;
    if (k.startsWith("$deleteFromPrimitiveList/")) {
      const field = k.slice("$deleteFromPrimitiveList/".length);
      const remove = Array.isArray(v) ? v : [];
      if (Array.isArray(out[field])) {
        out[field] = (out[field] as unknown[]).filter((x) => !remove.includes(x));
      }
      continue;
    }
    if (v === null) {
      delete out[k];
    } else if (Array.isArray(v)) {
      out[k] = mergeList(k, out[k], v, patch[`$setElementOrder/${k}`]);
    } else if (isObject(v)) {
      const merged = strategicMerge(out[k], v);
      if (merged === undefined) delete out[k];
      else out[k] = merged;
    } else out[k] = v;
  }
  return out;
}
