import assert from "node:assert/strict";
import { exitCode, parseJunit, render, summarize } from "./junit_summary.ts";

// What `deno test --junit-path` writes (Deno 2.9) for: an ignored test, a test with ">" in its
// name, and a test with a nested step, an ignored step and a failing step.
const XML = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="deno test" tests="7" failures="2" errors="0" time="0.020">
    <testsuite name="./a_test.ts" tests="7" disabled="2" errors="0" failures="2">
        <testcase name="real tier (skipped: KUBE_REAL_KUBECONFIG not set)" classname="./a_test.ts" time="0.000" line="1" col="6">
            <skipped/>
        </testcase>
        <testcase name="with &gt; in name" classname="./a_test.ts" time="0.001" line="2" col="6">
        </testcase>
        <testcase name="steps" classname="./a_test.ts" time="0.002" line="3" col="6">
            <failure message="1 test step failed">1 test step failed.</failure>
        </testcase>
        <testcase name="steps &gt; s1" classname="./a_test.ts" time="0.000" line="4" col="11">
        </testcase>
        <testcase name="steps &gt; s1 &gt; inner" classname="./a_test.ts" time="0.000" line="4" col="45">
        </testcase>
        <testcase name="steps &gt; s2" classname="./a_test.ts" time="0.001" line="5" col="11">
            <skipped/>
        </testcase>
        <testcase name="steps &gt; s3" classname="./a_test.ts" time="0.000" line="6" col="11">
            <failure message="Uncaught Error: boom">Error: boom</failure>
        </testcase>
    </testsuite>
</testsuites>`;

Deno.test("junit_summary counts tests and steps apart (a step is not a test)", () => {
  const s = summarize(parseJunit(XML));
  assert.deepEqual(s.tests, { passed: 1, failed: 1, skipped: 1 });
  assert.deepEqual(s.steps, { passed: 2, failed: 1, skipped: 1 });
  assert.equal(s.cases.find((c) => c.name === "with > in name")?.step, false);
  assert.equal(s.cases.find((c) => c.name === "steps > s1 > inner")?.step, true);
});

Deno.test("junit_summary lists skipped cases with their reasons and ends with the tests' line", () => {
  const text = render(summarize(parseJunit(XML)), []);
  assert.match(
    text,
    /skipped \(2\):\n {2}- a_test\.ts: real tier \(skipped: KUBE_REAL_KUBECONFIG not set\)\n {2}- a_test\.ts: steps > s2\n/,
  );
  assert.match(text, /failed tests \(1\):\n {2}- a_test\.ts: steps\n/);
  assert.match(
    text,
    /steps \(t\.step, counted apart\): 2 passed, 1 failed, 1 skipped\n1 passed, 1 failed, 1 skipped\n$/,
  );
});

Deno.test("junit_summary: a step whose test was registered by a helper in another file is a step", () => {
  const s = summarize(parseJunit(
    `<testcase name="e2e: failures" classname="./tests/testbed/harness/e2e_cluster.ts"></testcase>` +
      `<testcase name="e2e: failures &gt; missing bucket" classname="./tests/e2e/failures_test.ts"></testcase>`,
  ));
  assert.deepEqual(s.tests, { passed: 1, failed: 0, skipped: 0 });
  assert.deepEqual(s.steps, { passed: 1, failed: 0, skipped: 0 });
});

Deno.test("junit_summary exit code: failures and missing reports fail; skips fail only when asked (CI)", () => {
  const passing = summarize(parseJunit(
    `<testcase name="a" classname="./x.ts"></testcase><testcase name="b (skipped: no root)" classname="./x.ts"><skipped/></testcase>`,
  ));
  assert.equal(exitCode(passing, [], false), 0);
  assert.equal(exitCode(passing, [], true), 1);
  assert.equal(exitCode(passing, ["dist/test-reports/integration-e2e.xml"], false), 1);
  assert.equal(exitCode(summarize(parseJunit(XML)), [], false), 1);
  assert.match(render(passing, ["r.xml"]), /^report missing \(its runner died\): r\.xml\n/);
});
