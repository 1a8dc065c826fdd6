import assert from "node:assert/strict";
import { celFill, celFirst, celMap, celRuleProblem, celRules, celString } from "./cel.ts";
import { renderVolumePolicies } from "./render_volume_policy.ts";
import { resolveValues } from "./values_validate.ts";
import { STORAGE_CLASS_POLICY, VOLUME_POLICY } from "./names.ts";

Deno.test("celString() escapes quotes, backslashes and control characters", () => {
  assert.equal(celString(`it's a \\ "x"`), `'it\\'s a \\\\ "x"'`);
  assert.equal(celString("a\nb\x7f"), "'a\\x0ab\\x7f'");
  assert.equal(celString("équipe"), "'équipe'");
});

Deno.test("celFill() writes a template as a concatenation of literals and expressions", () => {
  assert.equal(celFill('Option "{name}" twice', { name: "x.n" }), `'Option "' + (x.n) + '" twice'`);
  assert.equal(celFill("plain"), "'plain'");
  assert.throws(() => celFill("{missing}"), /no expression for \{missing\}/);
});

Deno.test("celFirst() picks the first non-empty problem; rule lists are string maps", () => {
  assert.equal(celFirst(["a", "b", "c"]), "(a != '' ? a : (b != '' ? b : c))");
  assert.equal(celFirst([]), "''");
  assert.equal(celMap([["k", "1"]]), "{'k': 1}");
  assert.equal(
    celRules([{ match: "^a$", min: 1, message: "m" }]),
    "[{'m': '^a$', 'r': '', 'lo': '1', 'hi': '', 'msg': 'm'}]",
  );
  assert.match(celRuleProblem("R", "V"), /^\(size\(R\.filter\(r, !/);
});

Deno.test("renderVolumePolicies(): a policy and a binding per kind, only with validateVolumes", () => {
  const objects = renderVolumePolicies(resolveValues({}));
  assert.deepEqual(
    objects.map((o) => `${o.kind}/${o.metadata.name}`),
    [
      `ValidatingAdmissionPolicy/${VOLUME_POLICY}`,
      `ValidatingAdmissionPolicyBinding/${VOLUME_POLICY}`,
      `ValidatingAdmissionPolicy/${STORAGE_CLASS_POLICY}`,
      `ValidatingAdmissionPolicyBinding/${STORAGE_CLASS_POLICY}`,
    ],
  );
  const pv = objects[0]!.spec as {
    matchConditions: { expression: string }[];
    validations: { messageExpression: string }[];
    variables: { name: string }[];
  };
  assert.match(
    pv.matchConditions[0]!.expression,
    /object\.spec\.csi\.driver == 's3\.csi\.scality\.com'/,
  );
  assert.match(pv.matchConditions[0]!.expression, /oldObject\.spec\.csi != object\.spec\.csi/);
  assert.equal(pv.validations[0]!.messageExpression, "variables.problem");
  assert.equal(pv.variables.at(-1)!.name, "problem");
  assert.deepEqual(renderVolumePolicies(resolveValues({ validateVolumes: false })), []);
});
