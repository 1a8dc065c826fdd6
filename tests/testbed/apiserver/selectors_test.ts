import assert from "node:assert/strict";
import {
  checkFieldSelector,
  matchFields,
  matchLabels,
  parseFieldSelector,
  parseLabelSelector,
} from "./selectors.ts";
import { ApiError } from "./status_errors.ts";

const labels = { env: "prod", tier: "2" };

Deno.test("matchLabels() implements every operator like the real server", () => {
  const cases: [string, boolean][] = [
    ["env=prod", true],
    ["env==prod", true],
    ["env!=prod", false],
    ["missing!=x", true],
    ["env in (prod,dev)", true],
    ["env notin (prod,dev)", false],
    ["missing notin (a)", true],
    ["env", true],
    ["!env", false],
    ["!missing", true],
    ["tier>1", true],
    ["tier<2", false],
    ["env=prod,tier=2", true],
    ["Env=Prod", false],
    ["", true],
  ];
  for (const [text, want] of cases) {
    assert.equal(matchLabels(parseLabelSelector(text), labels), want, text);
  }
});

Deno.test("parseLabelSelector() rejects malformed input with 400", () => {
  for (const bad of ["env in (prod", "env=pr od", "a,,b"]) {
    assert.throws(
      () => parseLabelSelector(bad),
      (e) => e instanceof ApiError && e.code === 400,
      bad,
    );
  }
});

Deno.test("parseFieldSelector() handles =, ==, != and empty values", () => {
  const pod = { metadata: { name: "p" }, spec: { nodeName: "n1" }, status: { phase: "Running" } };
  assert.equal(matchFields(parseFieldSelector("spec.nodeName=n1"), pod), true);
  assert.equal(
    matchFields(parseFieldSelector("spec.nodeName==n1,status.phase!=Pending"), pod),
    true,
  );
  assert.equal(matchFields(parseFieldSelector("spec.nodeName="), pod), false);
  assert.equal(matchFields(parseFieldSelector("spec.nodeName="), { spec: {} }), true);
  assert.equal(matchFields(parseFieldSelector("spec.host=n1"), pod), true);
  assert.equal(matchFields(parseFieldSelector("spec.hostNetwork=false"), pod), true);
});

Deno.test("parseFieldSelector() rejects set operators and unescaped '='", () => {
  assert.throws(() => parseFieldSelector("status.phase in (Pending)"), ApiError);
  assert.throws(() => parseFieldSelector("a=b=c"), /unescaped character in value: 61/);
});

Deno.test("checkFieldSelector() enforces supported labels per type", () => {
  const sel = parseFieldSelector("spec.volumeID=x");
  assert.throws(
    () => checkFieldSelector(sel, ["spec.nodeName"], false, true),
    /field label not supported/,
  );
  assert.throws(
    () => checkFieldSelector(parseFieldSelector("data.a=1"), [], true, false),
    /not a known field selector/,
  );
  assert.throws(
    () => checkFieldSelector(parseFieldSelector("metadata.namespace=x"), [], false, true),
    /field label not supported/,
  );
  checkFieldSelector(parseFieldSelector("metadata.name=a,metadata.namespace=b"), [], true, false);
});
