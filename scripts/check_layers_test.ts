import assert from "node:assert/strict";
import { checkLayers, importSpecifiers, LAYERS } from "./check_layers.ts";

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
