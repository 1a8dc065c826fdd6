/**
 * Server-side apply and `metadata.managedFields` bookkeeping
 * (https://kubernetes.io/docs/reference/using-api/server-side-apply/), in the
 * "minimum viable" form:
 *
 * 1. Compute the applied field set (list-maps by merge key, other lists atomic).
 * 2. Conflict check: a field owned by another manager whose value would change → 409, unless
 *    `force`, which moves ownership to the applier.
 * 3. Merge the applied config into the live object.
 * 4. Remove fields this manager applied before, no longer applies, and nobody else owns.
 * 5. Replace the manager's `Apply` entry. Non-apply writes use {@link recordUpdate}.
 *
 * @module
 */
import { ApiError } from "./status_errors.ts";
import {
  decodePath,
  displayPath,
  type FieldSet,
  fieldSetOf,
  fromFieldsV1,
  type ListKeyFn,
  removeAt,
  toFieldsV1,
  valueAt,
} from "./field_set.ts";
import { clone, deepEqual, isObject, type JsonObject, meta } from "./json_value.ts";

/** One `managedFields` entry. */
export interface ManagedFieldsEntry {
  /** Field manager name. */
  manager: string;
  /** `Apply` or `Update`. */
  operation: "Apply" | "Update";
  /** apiVersion of the write. */
  apiVersion: string;
  /** RFC 3339 time of the last change of this entry. */
  time: string;
  /** Always `FieldsV1`. */
  fieldsType: "FieldsV1";
  /** Owned fields. */
  fieldsV1: JsonObject;
  /** `status` for subresource writes. */
  subresource?: string;
}

/** Common inputs of {@link serverSideApply} and {@link recordUpdate}. */
export interface ManagedFieldsOptions {
  /** Field manager. */
  readonly manager: string;
  /** apiVersion of the request. */
  readonly apiVersion: string;
  /** Timestamp for changed entries. */
  readonly now: string;
  /** List-map keys of list fields. */
  readonly listKeys: ListKeyFn;
  /** Subresource name for `/status` writes. */
  readonly subresource?: string;
}

/** Options for {@link serverSideApply}. */
export interface ApplyOptions extends ManagedFieldsOptions {
  /** Take ownership of conflicting fields. */
  readonly force: boolean;
}

interface Entry {
  raw: ManagedFieldsEntry;
  set: FieldSet;
}

function readEntries(obj: JsonObject | undefined): Entry[] {
  const list = obj ? (meta(obj).managedFields ?? []) : [];
  if (!Array.isArray(list)) return [];
  return (list as ManagedFieldsEntry[]).filter(isObject).map((raw) => ({
    raw: clone(raw),
    set: fromFieldsV1(raw.fieldsV1),
  }));
}

function writeEntries(obj: JsonObject, entries: Entry[]): void {
  const kept = entries.filter((e) => e.set.size > 0).map((e) => ({
    ...e.raw,
    fieldsV1: toFieldsV1(e.set),
  }));
  if (kept.length) meta(obj).managedFields = kept;
  else delete meta(obj).managedFields;
}

function sameEntry(e: Entry, manager: string, op: string, sub: string | undefined): boolean {
  return e.raw.manager === manager && e.raw.operation === op &&
    (e.raw.subresource ?? undefined) === sub;
}

function upsert(
  entries: Entry[],
  opts: ManagedFieldsOptions,
  op: "Apply" | "Update",
  set: FieldSet,
): void {
  const existing = entries.find((e) => sameEntry(e, opts.manager, op, opts.subresource));
  if (existing) {
    const same = existing.set.size === set.size && [...set].every((p) => existing.set.has(p));
    if (!same) existing.raw.time = opts.now;
    existing.set = set;
    return;
  }
  const raw: ManagedFieldsEntry = {
    manager: opts.manager,
    operation: op,
    apiVersion: opts.apiVersion,
    time: opts.now,
    fieldsType: "FieldsV1",
    fieldsV1: {},
  };
  if (opts.subresource) raw.subresource = opts.subresource;
  entries.push({ raw, set });
}

/** Deep-merge an applied configuration into a live object (list-maps by key, other lists replaced). */
function mergeApplied(
  live: unknown,
  applied: unknown,
  names: string[],
  listKeys: ListKeyFn,
): unknown {
  if (isObject(applied)) {
    const out: JsonObject = isObject(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(applied)) {
      out[k] = mergeApplied(out[k], v, [...names, k], listKeys);
    }
    return out;
  }
  if (Array.isArray(applied) && Array.isArray(live)) {
    const keys = listKeys(names);
    if (keys && keys.length === 0) {
      return [
        ...live,
        ...applied.filter((v) => !live.some((l) => deepEqual(l, v))),
      ];
    }
    if (keys && applied.every(isObject)) {
      const out = [...live];
      for (const item of applied as JsonObject[]) {
        const idx = out.findIndex((o) =>
          isObject(o) && keys.every((k) => deepEqual(o[k], item[k]))
        );
        if (idx >= 0) out[idx] = mergeApplied(out[idx], item, names, listKeys);
        else out.push(clone(item));
      }
      return out;
    }
  }
  return clone(applied);
}

/**
 * Apply `applied` (the request body) onto `live` (undefined = create) for `opts.manager`.
 * Returns the new object with updated managedFields; throws a 409 {@link ApiError} on conflicts.
 */
export function serverSideApply(
  live: JsonObject | undefined,
  applied: JsonObject,
  opts: ApplyOptions,
): JsonObject {
  const withStatus = opts.subresource === "status";
  const newSet = fieldSetOf(applied, opts.listKeys, withStatus);
  const entries = readEntries(live);
  const conflicts = new Map<string, string[]>();
  for (const e of entries) {
    if (e.raw.manager === opts.manager && e.raw.operation === "Apply") continue;
    for (const p of newSet) {
      if (!e.set.has(p)) continue;
      const path = decodePath(p);
      if (path[path.length - 1]?.startsWith("k:")) continue;
      if (deepEqual(valueAt(live, path), valueAt(applied, path))) continue;
      if (opts.force) e.set.delete(p);
      else {conflicts.set(e.raw.manager, [
          ...(conflicts.get(e.raw.manager) ?? []),
          displayPath(path),
        ]);}
    }
  }
  if (conflicts.size) throw conflictError(conflicts, entries);
  const merged = mergeApplied(live ?? {}, applied, [], opts.listKeys) as JsonObject;
  const mine = entries.find((e) => sameEntry(e, opts.manager, "Apply", opts.subresource));
  if (mine) {
    const others = entries.filter((e) => e !== mine);
    const removed = [...mine.set].filter((p) =>
      !newSet.has(p) && !others.some((o) => o.set.has(p))
    );
    for (const p of removed.map(decodePath).sort((a, b) => a.length - b.length)) {
      removeAt(merged, p);
    }
  }
  meta(merged).managedFields = live ? meta(live).managedFields : undefined;
  upsert(entries, opts, "Apply", newSet);
  writeEntries(merged, entries);
  return merged;
}

function conflictError(conflicts: Map<string, string[]>, entries: Entry[]): ApiError {
  const total = [...conflicts.values()].reduce((n, l) => n + l.length, 0);
  const causes = [...conflicts].flatMap(([m, fields]) =>
    fields.map((f) => ({
      reason: "FieldManagerConflict",
      message: `conflict with "${m}"`,
      field: f,
    }))
  );
  let message: string;
  if (
    total === 1 &&
    entries.find((e) => e.raw.manager === causes[0]!.message.slice(15, -1))?.raw.operation ===
      "Apply"
  ) {
    message = `Apply failed with 1 conflict: conflict with "${[...conflicts.keys()][0]}": ${
      causes[0]!.field
    }`;
  } else {
    const body = [...conflicts].map(([m, fields]) => {
      const apiVersion = entries.find((e) => e.raw.manager === m)?.raw.apiVersion ?? "v1";
      return `conflicts with "${m}" using ${apiVersion}:\n${
        fields.map((f) => `- ${f}`).join("\n")
      }`;
    }).join("\n");
    message = `Apply failed with ${total} conflict${total === 1 ? "" : "s"}: ${body}`;
  }
  return new ApiError(409, "Conflict", message, { causes });
}

/**
 * Record a non-apply write (create, update, patch) of `next` by `opts.manager`: the fields whose
 * value changed move to the manager's `Update` entry. `next` is modified in place.
 * Client-supplied `managedFields` that differ from `old`'s are kept as sent.
 */
export function recordUpdate(
  old: JsonObject | undefined,
  next: JsonObject,
  opts: ManagedFieldsOptions,
): void {
  const sent = meta(next).managedFields;
  if (old && sent !== undefined && !deepEqual(sent, meta(old).managedFields)) {
    if (Array.isArray(sent) && sent.length === 0) delete meta(next).managedFields;
    return;
  }
  const withStatus = opts.subresource === "status";
  const nextSet = fieldSetOf(next, opts.listKeys, withStatus);
  const entries = readEntries(old);
  const changed = new Set(
    [...nextSet].filter((p) =>
      !deepEqual(valueAt(old, decodePath(p)), valueAt(next, decodePath(p)))
    ),
  );
  const allSet = fieldSetOf(next, opts.listKeys, true);
  for (const e of entries) {
    for (const p of [...e.set]) if (changed.has(p) || !allSet.has(p)) e.set.delete(p);
  }
  if (changed.size) {
    const mine = entries.find((e) => sameEntry(e, opts.manager, "Update", opts.subresource));
    upsert(entries, opts, "Update", new Set([...(mine?.set ?? []), ...changed]));
  }
  writeEntries(next, entries);
}
