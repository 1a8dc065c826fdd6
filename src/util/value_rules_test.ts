import assert from "node:assert/strict";
import {
  ANY_CHAR,
  celTrim,
  charLength,
  firstChars,
  integerRules,
  patternPortabilityProblem,
  valueProblem,
} from "./value_rules.ts";

function assertPortablePattern(re: string): void {
  assert.equal(patternPortabilityProblem(re), undefined, re);
}

Deno.test("valueProblem(): the first failing rule speaks; numbers are bounded after the pattern", () => {
  const rules = [
    ...integerRules(1, 100, "must be from 1 to 100"),
    { reject: "^7$", message: "not {length} seven" },
  ];
  assert.equal(valueProblem(rules, "42"), undefined);
  assert.equal(valueProblem(rules, "042"), undefined);
  assert.equal(valueProblem(rules, "0"), "must be from 1 to 100");
  assert.equal(valueProblem(rules, "1e2"), "must be from 1 to 100");
  assert.equal(valueProblem(rules, "7"), "not 1 seven");
});

Deno.test("ANY_CHAR matches every character, where `.` would skip some", () => {
  const any = new RegExp(`^${ANY_CHAR}+$`, "u");
  for (const c of ["a", "\n", "\r", "\u2028", "\u{1F600}", "\x00"]) assert.ok(any.test(c), c);
  assertPortablePattern(`^${ANY_CHAR}{1,3}$`);
  assert.match(patternPortabilityProblem("^a.b$") ?? "", /bare/);
  assert.match(patternPortabilityProblem("^\\d$") ?? "", /class/);
  assert.match(patternPortabilityProblem("(?<=a)b") ?? "", /look-around/);
  assertPortablePattern("^a\\.b[.]$");
});

Deno.test("lengths and trimming count and strip as CEL does", () => {
  assert.equal(charLength("a\u{1F600}"), 2);
  assert.equal(firstChars("a\u{1F600}bc", 2), "a\u{1F600}");
  assert.equal(celTrim("\u00a0\t x \u3000\u0085"), "x");
  assert.equal(celTrim("\ufeffx"), "\ufeffx", "U+FEFF is not a space to Go");
});
