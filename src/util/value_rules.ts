/**
 * Value checks written as data, so that one list of rules is evaluated in two places with the same
 * outcome and the same message: here (the node plugin, the provisioner) and in the API server's
 * admission (the ValidatingAdmissionPolicies rendered from the same lists evaluate them in CEL,
 * `src/deploy/render_volume_policy.ts`).
 *
 * A rule passes when the value matches `match`, does not match `reject`, and — read as a decimal
 * number — lies within `min`..`max`; the first rule that fails gives the problem. Patterns use the
 * syntax RE2 (CEL's `matches()`) and JavaScript (with the `u` flag) read alike: no look-around, no
 * back-references, no `\s`/`\w` (their classes differ) and no `.` (use {@link ANY_CHAR}). Lengths
 * count characters (code points), as CEL's `size()` does.
 *
 * @module
 */

/**
 * Any one character, in both dialects (`.` differs: JavaScript's skips `\r` and U+2028/9, RE2's
 * only `\n`).
 */
export const ANY_CHAR = "(?:[^\\x00-\\x1f\\x7f]|[\\x00-\\x1f\\x7f])";

/** One check of a value. */
export interface ValueRule {
  /** Pattern the value must match. */
  readonly match?: string;
  /** Pattern the value must not match. */
  readonly reject?: string;
  /** Inclusive lower bound of the value read as a number (only after a `match` that ensures one). */
  readonly min?: number;
  /** Inclusive upper bound, as {@link min}. */
  readonly max?: number;
  /** The problem when the rule fails; `{length}` is replaced by the value's length in characters. */
  readonly message: string;
}

const compiled = new Map<string, RegExp>();

/** The pattern as a JavaScript regular expression (Unicode mode, cached). */
export function rulePattern(source: string): RegExp {
  let re = compiled.get(source);
  if (!re) {
    re = new RegExp(source, "u");
    compiled.set(source, re);
  }
  return re;
}

/** Length in characters (code points), as CEL's `size()`. */
export function charLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/** The first `n` characters (code points), as CEL's `substring(0, n)`. */
export function firstChars(value: string, n: number): string {
  let out = "";
  let i = 0;
  for (const c of value) {
    if (i++ >= n) break;
    out += c;
  }
  return out;
}

/**
 * Why `source` is not a pattern both dialects read alike, or undefined: it must compile in
 * JavaScript's Unicode mode and use no look-around, back-reference, `\s \w \b \d` class or bare `.`.
 */
export function patternPortabilityProblem(source: string): string | undefined {
  try {
    rulePattern(source);
  } catch (err) {
    return `does not compile: ${(err as Error).message}`;
  }
  if (/\(\?[=!<]|\\[1-9]|\\[sSwWbBdD]/.test(source)) {
    return "uses look-around, a back-reference or a \\s \\w \\b \\d class";
  }
  const outside = source.replace(/\\./g, "").replace(/\[(?:\\.|[^\]])*\]/g, "");
  return outside.includes(".") ? 'uses a bare "." (use ANY_CHAR or [.])' : undefined;
}

/** Whether `value` passes `rule`. */
export function rulePasses(rule: ValueRule, value: string): boolean {
  if (rule.match !== undefined && !rulePattern(rule.match).test(value)) return false;
  if (rule.reject !== undefined && rulePattern(rule.reject).test(value)) return false;
  if (rule.min !== undefined && !(Number(value) >= rule.min)) return false;
  if (rule.max !== undefined && !(Number(value) <= rule.max)) return false;
  return true;
}

/** The message of a failed rule for `value`. */
export function ruleMessage(rule: ValueRule, value: string): string {
  return rule.message.replaceAll("{length}", String(charLength(value)));
}

/** The problem of the first rule `value` fails, or undefined. */
export function valueProblem(rules: readonly ValueRule[], value: string): string | undefined {
  for (const rule of rules) {
    if (!rulePasses(rule, value)) return ruleMessage(rule, value);
  }
  return undefined;
}

/**
 * Rules for a decimal integer from `min` to `max` (at most 10 digits, leading zeros allowed).
 * @param message the problem, e.g. "must be an integer from 1 to 100"
 */
export function integerRules(min: number, max: number, message: string): ValueRule[] {
  return [{ match: "^[0-9]{1,10}$", min, max, message }];
}

/**
 * Go's `unicode.IsSpace` (what CEL's `trim()` strips): the space characters trimmed from mount
 * options on both sides, so the node and the admission policy read the same name and value.
 */
const SPACE =
  "\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const TRIM = new RegExp(`^[${SPACE}]+|[${SPACE}]+$`, "gu");

/** `value` without leading and trailing spaces, as CEL's `trim()`. */
export function celTrim(value: string): string {
  return value.replace(TRIM, "");
}
