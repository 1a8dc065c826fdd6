import assert from "node:assert/strict";
import { checkLayers, importSpecifiers, LAYERS, unexpected, zoneOf } from "./check_layers.ts";

const mods = (entries: Record<string, string>) => new Map(Object.entries(entries));
const problems = (entries: Record<string, string>) =>
  checkLayers(mods(entries)).map((v) => `${v.file} → ${v.imports}: ${v.problem}`);

Deno.test("importSpecifiers() finds static, type-only, re-export and dynamic relative imports", () => {
  const src = [
    `import { a } from "./a.ts";`,
    `import type { B } from "../b/b.ts";`,
    `import {\n  c,\n  d,\n} from "../c/c.ts";`,
    `export { e } from "./e.ts";`,
    `export * from "./f.ts";`,
    `const g = await import("../g/g.ts");`,
    `import "./side_effect.ts";`,
    `import x from "npm:yaml@2";`,
    `// a comment with from "./not_code.ts" is not an import statement`,
  ].join("\n");
  assert.deepEqual(importSpecifiers(src), [
    "./a.ts",
    "../b/b.ts",
    "../c/c.ts",
    "./e.ts",
    "./f.ts",
    "../g/g.ts",
    "./side_effect.ts",
  ]);
});

Deno.test("checkLayers() accepts imports of lower layers and within a folder", () => {
  assert.deepEqual(
    problems({
      "src/cmd/node/main.ts": `import { run } from "../../node/run.ts";`,
      "src/node/run.ts": `import { x } from "./x.ts";\nimport { e } from "../csi/errors.ts";`,
      "src/node/x.ts": `import { log } from "../util/log.ts";`,
      "src/csi/errors.ts": `import { log } from "../util/log.ts";`,
      "src/util/log.ts": ``,
    }),
    [],
  );
});

Deno.test("checkLayers() refuses a feature folder importing another feature folder", () => {
  const found = problems({
    "src/provisioning/service.ts": `import { VOLUME_CONTEXT } from "../node/publish_request.ts";`,
    "src/node/publish_request.ts": ``,
  });
  assert.equal(found.length, 1);
  assert.match(found[0]!, /feature folder provisioning\/ imports feature folder node\//);
});

Deno.test("checkLayers() refuses an upward import and a peer import of shared folders", () => {
  const found = problems({
    "src/kube/resources.ts": `import { S3PA_KIND } from "../api/mountpoint_s3_pod_attachment.ts";`,
    "src/api/mountpoint_s3_pod_attachment.ts": ``,
    "src/csi/x.ts": `import { y } from "../mppod/y.ts";`,
    "src/mppod/y.ts": ``,
    "src/util/z.ts": `import { n } from "../node/n.ts";`,
    "src/node/n.ts": ``,
  });
  assert.equal(found.length, 3, found.join("\n"));
  assert.match(found[0]!, /kube\/ \(layer 1\) imports api\/ \(layer 2\)/);
  assert.match(found[1]!, /csi\/ \(layer 3\) imports mppod\/ \(layer 3\)/);
  assert.match(found[2]!, /util\/ \(layer 0\) imports node\/ \(layer 5\)/);
});

Deno.test("checkLayers() refuses src/ importing tests/ (the testbed)", () => {
  const found = problems({
    "src/node/x.ts": `import { Kubelet } from "../../tests/testbed/no_such_module.ts";`,
  });
  assert.equal(found.length, 1);
  assert.match(found[0]!, /src\/ must not import tests\//);
});

Deno.test("checkLayers() reports an import cycle, also within one folder, with its path", () => {
  const found = problems({
    "src/node/a.ts": `import { b } from "./b.ts";`,
    "src/node/b.ts": `import type { C } from "./c.ts";`,
    "src/node/c.ts": `import { a } from "./a.ts";`,
    "src/node/d.ts": `import { a } from "./a.ts";`,
  });
  assert.deepEqual(found, [
    "src/node/a.ts → src/node/b.ts: import cycle: src/node/a.ts → src/node/b.ts → src/node/c.ts → src/node/a.ts",
  ]);
});

Deno.test("checkLayers() refuses a folder of src/ that has no layer", () => {
  const found = problems({ "src/newthing/x.ts": `` });
  assert.equal(found.length, 1);
  assert.match(found[0]!, /src\/newthing\/ has no layer/);
  assert.equal(LAYERS["newthing"], undefined);
});

Deno.test("zoneOf() tells src/ folders, scripts/, tiers and the shared code of tests/ apart", () => {
  assert.deepEqual(zoneOf("src/node/x.ts"), { kind: "src", folder: "node" });
  assert.deepEqual(zoneOf("scripts/bench.ts"), { kind: "scripts" });
  assert.deepEqual(zoneOf("tests/node/_harness.ts"), { kind: "tier", tier: "node" });
  assert.deepEqual(zoneOf("tests/testbed/harness/node.ts"), { kind: "shared", folder: "testbed" });
  assert.deepEqual(zoneOf("tests/scenarios/drain.ts"), { kind: "shared", folder: "scenarios" });
  assert.deepEqual(zoneOf("tests/_helpers.ts"), { kind: "shared", folder: "tests" });
  assert.equal(zoneOf("docs/x.ts"), undefined);
});

Deno.test("checkLayers() accepts a tier importing itself, the shared code, src/ and scripts/", () => {
  assert.deepEqual(
    problems({
      "tests/node/publish_test.ts": [
        `import { h } from "./_harness.ts";`,
        `import { n } from "../testbed/harness/node.ts";`,
        `import { s } from "../scenarios/cluster.ts";`,
        `import { t } from "../_helpers.ts";`,
        `import { u } from "../../src/util/log.ts";`,
        `import { l } from "../../scripts/leftovers.ts";`,
      ].join("\n"),
      "tests/node/_harness.ts": ``,
      "tests/testbed/harness/node.ts": `import { l } from "../../../scripts/proc_stat.ts";`,
      "tests/scenarios/cluster.ts": `import type { Pod } from "../testbed/kubelet/k8s_types.ts";`,
      "tests/testbed/kubelet/k8s_types.ts": ``,
      "tests/testbed/sandbox/run.ts": `import { s } from "../../scenarios/cluster.ts";`,
      "tests/_helpers.ts": ``,
      "src/util/log.ts": ``,
      "scripts/leftovers.ts": ``,
      "scripts/proc_stat.ts": ``,
    }),
    [],
  );
});

Deno.test("checkLayers() refuses a tier importing another tier, naming a private module", () => {
  const found = problems({
    "tests/mounter/mounter_test.ts": `import { startNode } from "../node/_harness.ts";`,
    "tests/node/_harness.ts": ``,
    "tests/deploy/rbac_test.ts": `import { http } from "../kube_contract/kube_http.ts";`,
    "tests/kube_contract/kube_http.ts": ``,
  });
  assert.equal(found.length, 2, found.join("\n"));
  assert.match(found[0]!, /tier mounter\/ imports tier node\/ \(_harness\.ts is private to it\)/);
  assert.match(found[1]!, /tier deploy\/ imports tier kube_contract\/: move the shared code/);
});

Deno.test("checkLayers() refuses the testbed, the scenarios and tests/*.ts importing a tier", () => {
  const found = problems({
    "tests/testbed/sandbox/sandbox.ts": `import { E2E } from "../../e2e/_e2e.ts";`,
    "tests/scenarios/drain.ts": `import { x } from "../real_node/_harness.ts";`,
    "tests/_helpers.ts": `import { y } from "./sys/_helpers.ts";`,
    "tests/e2e/_e2e.ts": ``,
    "tests/real_node/_harness.ts": ``,
    "tests/sys/_helpers.ts": ``,
  });
  assert.equal(found.length, 3, found.join("\n"));
  assert.match(
    found[0]!,
    /tests\/testbed\/ is shared by the tiers and must not import the tier e2e\//,
  );
  assert.match(found[1]!, /tests\/scenarios\/ is shared .* tier real_node\//);
  assert.match(found[2]!, /tests\/ is shared .* tier sys\//);
});

Deno.test("checkLayers() refuses scripts/ importing tests/ and src/ importing scripts/", () => {
  const found = problems({
    "scripts/bench_node.ts": `import { h } from "../tests/testbed/harness/node.ts";`,
    "tests/testbed/harness/node.ts": ``,
    "src/deploy/x.ts": `import { g } from "../../scripts/_gen_util.ts";`,
    "scripts/_gen_util.ts": ``,
  });
  assert.equal(found.length, 2, found.join("\n"));
  assert.match(found[0]!, /scripts\/ must not import tests\//);
  assert.match(found[1]!, /src\/ must not import scripts\//);
});

Deno.test("checkLayers() reports a type-only import cycle in tests/ and across trees", () => {
  const found = problems({
    "tests/testbed/apiserver/cluster.ts": `import { gc } from "./gc.ts";`,
    "tests/testbed/apiserver/gc.ts": `import type { Cluster } from "./cluster.ts";`,
    "scripts/a.ts": `import { b } from "../tests/testbed/b.ts";`,
    "tests/testbed/b.ts": `import type { A } from "../../scripts/a.ts";`,
  });
  const cyclesFound = found.filter((f) => f.includes("import cycle"));
  assert.equal(cyclesFound.length, 2, found.join("\n"));
  assert.match(
    cyclesFound.join("\n"),
    /tests\/testbed\/apiserver\/cluster\.ts → tests\/testbed\/apiserver\/gc\.ts → tests\/testbed\/apiserver\/cluster\.ts/,
  );
  assert.match(cyclesFound.join("\n"), /scripts\/a\.ts → tests\/testbed\/b\.ts → scripts\/a\.ts/);
});

Deno.test("unexpected(): allowed violations pass, an allowlist entry matching none is stale", () => {
  const all = checkLayers(mods({
    "tests/mounter/mounter_test.ts": `import { startNode } from "../node/_harness.ts";`,
    "tests/node/_harness.ts": ``,
  }));
  assert.equal(all.length, 1);
  const allowed = new Set([
    "tests/mounter/mounter_test.ts → ../node/_harness.ts",
    "tests/faults/gone_test.ts → ../node/_harness.ts",
  ]);
  const r = unexpected(all, allowed);
  assert.deepEqual(r.violations, []);
  assert.deepEqual(r.stale, ["tests/faults/gone_test.ts → ../node/_harness.ts"]);
  assert.equal(unexpected(all, new Set()).violations.length, 1);
});
