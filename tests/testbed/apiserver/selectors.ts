/**
 * Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query parameters
 * with the real server's grammar and semantics
 * (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/ and `field-selectors/`
 * beside it). Parse errors are {@link ApiError} 400s.
 *
 * @module
 */
import { ApiError, badRequest } from "./status_errors.ts";

/** One requirement of a label selector. */
export interface LabelRequirement {
  /** Label key. */
  readonly key: string;
  /** Operator. */
  readonly op: "=" | "!=" | "in" | "notin" | "exists" | "!exists" | "gt" | "lt";
  /** Values (one for =, !=, gt, lt). */
  readonly values: readonly string[];
}

/** A parsed label selector (AND of requirements); empty matches everything. */
export type LabelSelector = readonly LabelRequirement[];

const KEY_REGEXP =
  /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$/;

function selectorError(text: string): ApiError {
  return badRequest(`unable to parse requirement: ${text}`);
}

/** Split on commas that are not inside parentheses. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  parts.push(cur);
  return parts;
}

function checkKey(key: string): string {
  if (!KEY_REGEXP.test(key)) throw selectorError(`invalid label key "${key}"`);
  return key;
}

function checkValue(value: string): string {
  if (/\s/.test(value)) {
    throw selectorError(`found '${value.split(/\s+/)[1] ?? ""}', expected: ',' or 'end of string'`);
  }
  return value;
}

const SET_REGEXP = /^(\S+)\s+(in|notin)\s*\((.*)\)$/;

/** Parse a label selector such as `app=x,tier in (a,b),!legacy`. */
export function parseLabelSelector(text: string | null | undefined): LabelSelector {
  if (!text || !text.trim()) return [];
  const out: LabelRequirement[] = [];
  for (const raw of splitTopLevel(text)) {
    const part = raw.trim();
    if (!part) throw selectorError("found '', expected: identifier");
    const set = SET_REGEXP.exec(part);
    if (set) {
      const values = set[3]!.split(",").map((v) => v.trim());
      if (values.some((v) => !v)) throw selectorError("found '', expected: ',' or ')'");
      out.push({ key: checkKey(set[1]!), op: set[2] as "in" | "notin", values });
      continue;
    }
    if (/\s(in|notin)\s*\(/.test(part)) throw selectorError("found '', expected: ',' or ')'");
    const m = /^([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(.*)$/.exec(part);
    if (m) {
      const op = m[2] === "=="
        ? "="
        : m[2] === "<"
        ? "lt"
        : m[2] === ">"
        ? "gt"
        : m[2] as "=" | "!=";
      const value = checkValue(m[3]!.trim());
      if ((op === "lt" || op === "gt") && !/^-?\d+$/.test(value)) {
        throw selectorError(`for 'Gt', 'Lt' operators, the value must be an integer`);
      }
      out.push({ key: checkKey(m[1]!), op, values: [value] });
      continue;
    }
    if (part.startsWith("!")) {
      out.push({ key: checkKey(part.slice(1).trim()), op: "!exists", values: [] });
      continue;
    }
    out.push({ key: checkKey(part), op: "exists", values: [] });
  }
  return out;
}

/** Whether `labels` satisfy every requirement. */
export function matchLabels(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const l = labels ?? {};
  return selector.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case "=":
        return has && v === r.values[0];
      case "!=":
        return !has || v !== r.values[0];
      case "in":
        return has && r.values.includes(v!);
      case "notin":
        return !has || !r.values.includes(v!);
      case "exists":
        return has;
      case "!exists":
        return !has;
      case "gt":
        return has && /^-?\d+$/.test(v!) && Number(v) > Number(r.values[0]);
      case "lt":
        return has && /^-?\d+$/.test(v!) && Number(v) < Number(r.values[0]);
    }
  });
}

/** One term of a field selector. */
export interface FieldRequirement {
  /** Field label, e.g. `spec.nodeName`. */
  readonly field: string;
  /** Equality or inequality. */
  readonly op: "=" | "!=";
  /** Value ("" matches an empty or missing field). */
  readonly value: string;
}

/** A parsed field selector (AND). */
export type FieldSelector = readonly FieldRequirement[];

function unescapeFieldValue(raw: string): string {
  let out = "";
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch === "\\") {
      const next = raw[i + 1];
      if (next === "\\" || next === "," || next === "=") {
        out += next;
        i++;
        continue;
      }
      throw badRequest(`invalid field selector: invalid escape sequence: ${raw}`);
    }
    if (ch === "=" || ch === ",") {
      throw badRequest(`invalid field selector: unescaped character in value: ${ch.charCodeAt(0)}`);
    }
    out += ch;
  }
  return out;
}

/** Parse `a=b,c!=d` (also `==`). Set operators are rejected as on the real server. */
export function parseFieldSelector(text: string | null | undefined): FieldSelector {
  if (!text || !text.trim()) return [];
  const out: FieldRequirement[] = [];
  for (const part of text.split(/(?<!\\),/)) {
    const m = /^([^=!\s]+)\s*(==|=|!=)(.*)$/.exec(part.trim());
    if (!m) throw badRequest(`invalid selector: '${text}'; can't understand '${part}'`);
    out.push({
      field: m[1]!,
      op: m[2] === "!=" ? "!=" : "=",
      value: unescapeFieldValue(m[3]!),
    });
  }
  return out;
}

/** Value of a dotted path in an object, rendered as a field-selector string ("" if missing). */
export function fieldValue(obj: unknown, path: string): string {
  let cur: unknown = obj;
  for (const seg of path.split(".")) {
    if (cur === null || typeof cur !== "object") return "";
    cur = (cur as Record<string, unknown>)[seg];
  }
  if (cur === undefined || cur === null) return "";
  if (typeof cur === "object") return JSON.stringify(cur);
  return String(cur);
}

/**
 * Check that every field label is supported. `supported` lists the type's extra labels;
 * `namespaced` decides whether `metadata.namespace` is allowed.
 */
export function checkFieldSelector(
  selector: FieldSelector,
  supported: readonly string[],
  namespaced: boolean,
  custom: boolean,
): void {
  for (const r of selector) {
    const f = r.field === "spec.host" ? "spec.nodeName" : r.field;
    if (f === "metadata.name" || supported.includes(f)) continue;
    if (f === "metadata.namespace" && (namespaced || !custom)) continue;
    if (custom || supported.length > 0) throw badRequest(`field label not supported: ${r.field}`);
    throw badRequest(
      `"${r.field}" is not a known field selector: only "metadata.name", "metadata.namespace"`,
    );
  }
}

/** Whether `obj` satisfies the field selector (pod rules: `spec.host` alias, first pod IP). */
export function matchFields(selector: FieldSelector, obj: unknown): boolean {
  return selector.every((r) => {
    const field = r.field === "spec.host" ? "spec.nodeName" : r.field;
    let v: string;
    if (field === "spec.hostNetwork") v = fieldValue(obj, field) === "true" ? "true" : "false";
    else if (field === "source") v = fieldValue(obj, "source.component");
    else v = fieldValue(obj, field);
    return r.op === "=" ? v === r.value : v !== r.value;
  });
}
