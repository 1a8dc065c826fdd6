/**
 * Writing CEL (the expression language of ValidatingAdmissionPolicies) from TypeScript data:
 * literals, and the shared message templates (`src/util/message_template.ts`) as string
 * concatenations, so a policy refuses with the words the node plugin or provisioner uses.
 *
 * @module
 */
import { templatePieces } from "../util/message_template.ts";
import type { ValueRule } from "../util/value_rules.ts";

/** A CEL string literal (single-quoted, escaped). */
export function celString(text: string): string {
  let out = "'";
  for (const c of text) {
    const code = c.codePointAt(0)!;
    if (c === "\\") out += "\\\\";
    else if (c === "'") out += "\\'";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += c;
  }
  return `${out}'`;
}

/** A CEL list of string literals. */
export function celStrings(items: readonly string[]): string {
  return `[${items.map(celString).join(", ")}]`;
}

/** A CEL map from string literals to CEL expressions. */
export function celMap(entries: readonly (readonly [string, string])[]): string {
  return `{${entries.map(([k, v]) => `${celString(k)}: ${v}`).join(", ")}}`;
}

/**
 * A CEL map from string literals to string expressions, each wrapped in `string()`: CEL wants the
 * values of a literal map to share one type, and a value read from a list or map of unknown
 * element type would otherwise be `dyn`.
 */
export function celStringValues(entries: readonly (readonly [string, string])[]): string {
  return celMap(entries.map(([k, e]) => [k, `string(${e})`]));
}

/** A CEL map from string literals to string literals. */
export function celStringMap(record: Readonly<Record<string, string>>): string {
  return celMap(Object.entries(record).map(([k, v]) => [k, celString(v)]));
}

/**
 * `template` as a CEL string expression: literal pieces quoted, each `{name}` replaced by the CEL
 * expression `values[name]` (which must be a string).
 * @throws {Error} when a placeholder has no expression (a bug)
 */
export function celFill(template: string, values: Readonly<Record<string, string>> = {}): string {
  const parts = templatePieces(template).map((p) => {
    if ("text" in p) return celString(p.text);
    const e = values[p.name];
    if (e === undefined) throw new Error(`CEL template: no expression for {${p.name}}`);
    return `(${e})`;
  });
  return parts.length === 0 ? "''" : parts.join(" + ");
}

/**
 * A list of value rules as a CEL list of string maps (`m` match, `r` reject, `lo`/`hi` bounds,
 * `msg`), for {@link celRuleProblem}.
 */
export function celRules(rules: readonly ValueRule[]): string {
  return `[${
    rules.map((r) =>
      celMap([
        ["m", celString(r.match ?? "")],
        ["r", celString(r.reject ?? "")],
        ["lo", celString(r.min === undefined ? "" : String(r.min))],
        ["hi", celString(r.max === undefined ? "" : String(r.max))],
        ["msg", celString(r.message)],
      ])
    ).join(", ")
  }]`;
}

/** CEL: whether the string `value` passes the rule map `rule` (see {@link celRules}). */
export function celRulePasses(rule: string, value: string): string {
  return `((${rule}.m == '' || ${value}.matches(${rule}.m)) && ` +
    `(${rule}.r == '' || !${value}.matches(${rule}.r)) && ` +
    `(${rule}.lo == '' || double(${value}) >= double(${rule}.lo)) && ` +
    `(${rule}.hi == '' || double(${value}) <= double(${rule}.hi)))`;
}

/**
 * CEL: the problem of the first rule of the list `rules` that the string `value` fails (with
 * `{length}` filled), or ''. Mirrors `valueProblem()` of `src/util/value_rules.ts`.
 */
export function celRuleProblem(rules: string, value: string): string {
  const fails = `${rules}.filter(r, !${celRulePasses("r", value)})`;
  return `(size(${fails}) > 0 ? ${fails}[0].msg.replace('{length}', string(${value}.size())) : '')`;
}

/** CEL: the first of `problems` (string expressions) that is not '', else ''. */
export function celFirst(problems: readonly string[]): string {
  if (problems.length === 0) return "''";
  return problems.slice(0, -1).reduceRight(
    (rest, p) => `(${p} != '' ? ${p} : ${rest})`,
    problems.at(-1)!,
  );
}
