/**
 * LIST semantics (https://kubernetes.io/docs/reference/using-api/api-concepts/): selectors,
 * `resourceVersion` / `resourceVersionMatch`, `limit` / `continue` paging with opaque tokens, and
 * the real server's error answers.
 *
 * @module
 */
import type { Cluster } from "./cluster.ts";
import { type JsonObject, meta } from "./json_value.ts";
import { type ResourceType, storageKey } from "./resources.ts";
import {
  checkFieldSelector,
  type FieldSelector,
  type LabelSelector,
  matchFields,
  matchLabels,
  parseFieldSelector,
  parseLabelSelector,
} from "./selectors.ts";
import { ApiError, badRequest, expired, invalid } from "./status_errors.ts";

/** Parsed selectors of a list or watch. */
export interface Selection {
  /** Namespace, or undefined for all namespaces / cluster scope. */
  readonly namespace: string | undefined;
  /** Label selector. */
  readonly labels: LabelSelector;
  /** Field selector. */
  readonly fields: FieldSelector;
}

/** Parse and check `labelSelector` / `fieldSelector` for type `t`. */
export function parseSelection(
  t: ResourceType,
  namespace: string | undefined,
  q: URLSearchParams,
): Selection {
  const fields = parseFieldSelector(q.get("fieldSelector"));
  checkFieldSelector(fields, t.selectableFields, t.namespaced, t.custom);
  return { namespace, labels: parseLabelSelector(q.get("labelSelector")), fields };
}

/** Whether `obj` (client view) is selected. */
export function selects(sel: Selection, obj: JsonObject): boolean {
  const m = meta(obj);
  if (sel.namespace !== undefined && m.namespace !== sel.namespace) return false;
  return matchLabels(sel.labels, m.labels as Record<string, string> | undefined) &&
    matchFields(sel.fields, obj);
}

interface ContinueToken {
  readonly rv: number;
  readonly start: string;
}

function encodeContinue(tok: ContinueToken): string {
  return btoa(JSON.stringify({ v: "meta.k8s.io/v1", rv: tok.rv, start: tok.start }));
}

function decodeContinue(text: string): ContinueToken {
  try {
    const t = JSON.parse(atob(text)) as { rv?: unknown; start?: unknown };
    if (typeof t.rv !== "number" || typeof t.start !== "string") throw new Error("bad token");
    return { rv: t.rv, start: t.start };
  } catch {
    throw badRequest(`invalid continue token: ${text}`);
  }
}

function listOptionsInvalid(field: string, reason: string, message: string): ApiError {
  return invalid("ListOptions", "meta.k8s.io", "", [{ reason, message, field }]);
}

/** Serve a LIST of `t` (client view, before Table conversion). */
export function listObjects(
  cluster: Cluster,
  t: ResourceType,
  sel: Selection,
  q: URLSearchParams,
): JsonObject {
  const rvParam = q.get("resourceVersion") ?? "";
  const match = q.get("resourceVersionMatch") ?? "";
  const cont = q.get("continue") ?? "";
  const current = cluster.store.resourceVersion;
  if (q.get("sendInitialEvents")) {
    throw listOptionsInvalid(
      "sendInitialEvents",
      "FieldValueForbidden",
      "Forbidden: sendInitialEvents is forbidden for list",
    );
  }
  if (match && !["Exact", "NotOlderThan"].includes(match)) {
    throw listOptionsInvalid(
      "resourceVersionMatch",
      "FieldValueNotSupported",
      `Unsupported value: "${match}": supported values: "Exact", "NotOlderThan", ""`,
    );
  }
  if (match && !rvParam) {
    throw listOptionsInvalid(
      "resourceVersionMatch",
      "FieldValueForbidden",
      "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
    );
  }
  if (match === "Exact" && rvParam === "0") {
    throw listOptionsInvalid(
      "resourceVersionMatch",
      "FieldValueForbidden",
      `Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"`,
    );
  }
  if (cont && rvParam) {
    throw badRequest("specifying resource version is not allowed when using continue");
  }
  if (rvParam && !/^\d+$/.test(rvParam)) {
    throw new ApiError(
      500,
      "",
      `resourceVersion: Invalid value: "${rvParam}": strconv.ParseUint: parsing "${rvParam}": invalid syntax`,
    );
  }
  const rv = Number(rvParam || 0);
  if (rv > current) {
    throw new ApiError(
      504,
      "Timeout",
      `Timeout: Too large resource version: ${rv}, current: ${current}`,
      {
        causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
        retryAfterSeconds: 1,
      },
    );
  }
  if (match === "Exact" && rv !== current) {
    throw expired("The resourceVersion for the provided list is too old.");
  }
  const token = cont ? decodeContinue(cont) : undefined;
  const ns = t.namespaced ? sel.namespace : undefined;
  let items = cluster.store.list(storageKey(t), ns).map((o) => cluster.present(t, o)).filter((o) =>
    selects(sel, o)
  );
  const keyOf = (o: JsonObject) => `${meta(o).namespace ?? ""}/${meta(o).name}`;
  if (token) items = items.filter((o) => keyOf(o) > token.start);
  const limit = rvParam === "0" ? 0 : Number(q.get("limit") ?? 0);
  const listRv = token ? token.rv : current;
  const listMeta: JsonObject = { resourceVersion: String(listRv) };
  if (limit > 0 && items.length > limit) {
    const page = items.slice(0, limit);
    listMeta.continue = encodeContinue({ rv: listRv, start: keyOf(page[page.length - 1]!) });
    listMeta.remainingItemCount = items.length - limit;
    items = page;
  }
  if (!t.custom) {
    items = items.map((o) => {
      const { apiVersion: _a, kind: _k, ...rest } = o;
      return rest;
    });
  }
  return {
    kind: t.listKind,
    apiVersion: t.group ? `${t.group}/${t.version}` : t.version,
    metadata: listMeta,
    items,
  };
}
