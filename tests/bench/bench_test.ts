import assert from "node:assert/strict";
import { keptSections } from "./bench.ts";

Deno.test("bench: sections of benchmarks not run this time are kept verbatim", () => {
  const doc =
    "# Benchmarks\n\nintro\n\n## controller\n\nold table\n\n## node\n\nnode table\n| a |\n";
  assert.deepEqual(keptSections(doc, ["controller"]), [
    { name: "node", text: "## node\n\nnode table\n| a |\n" },
  ]);
  assert.deepEqual(keptSections(doc, ["controller", "node"]), []);
  assert.deepEqual(keptSections("", ["controller"]), []);
});
