/**
 * The tier does not import the driver's gRPC server code, so it checks the driver against the proto
 * rather than against the driver's own view of it: no `src/csi/proto.ts`, `src/csi/server.ts` or
 * generated descriptor, and only types (no method tables) from the generated
 * `src/csi/gen/csi_types.ts`. Requests are decoded from the proto file with `@grpc/proto-loader`
 * (`_csi_proto.ts`).
 */
import assert from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = join(HERE, "..", "..");
const FORBIDDEN = ["src/csi/proto.ts", "src/csi/server.ts", "src/csi/gen/csi_descriptor.ts"];
const TYPES_ONLY = ["src/csi/gen/csi_types.ts"];

/** Every static or dynamic import of `source`: its specifier and whether it imports types only. */
export function importsOf(source: string): { specifier: string; typeOnly: boolean }[] {
  const out: { specifier: string; typeOnly: boolean }[] = [];
  const statement = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;]*?)\s*from\s*["']([^"']+)["']/g;
  for (const m of source.matchAll(statement)) {
    const names = m[3]!;
    const braces = /^\{([\s\S]*)\}$/.exec(names.trim());
    const allTyped = braces !== null &&
      braces[1]!.split(",").map((n) => n.trim()).filter((n) => n !== "").every((n) =>
        n.startsWith("type ")
      );
    out.push({ specifier: m[4]!, typeOnly: m[2] !== undefined || allTyped });
  }
  for (const m of source.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)) {
    out.push({ specifier: m[1]!, typeOnly: false });
  }
  return out;
}

Deno.test("importsOf() tells type-only imports from value imports", () => {
  const src = `import type { A } from "./a.ts";
import { type B, type C } from "./b.ts";
import { type D, E } from "./c.ts";
import F from "./f.ts";
export { G } from "./g.ts";
const h = await import("./h.ts");`;
  assert.deepEqual(importsOf(src), [
    { specifier: "./a.ts", typeOnly: true },
    { specifier: "./b.ts", typeOnly: true },
    { specifier: "./c.ts", typeOnly: false },
    { specifier: "./f.ts", typeOnly: false },
    { specifier: "./g.ts", typeOnly: false },
    { specifier: "./h.ts", typeOnly: false },
  ]);
});

Deno.test("the conformance tier imports none of the CSI server's code", async () => {
  const wrong: string[] = [];
  let files = 0;
  for await (const e of Deno.readDir(HERE)) {
    if (!e.isFile || !e.name.endsWith(".ts")) continue;
    files++;
    const source = await Deno.readTextFile(join(HERE, e.name));
    for (const { specifier, typeOnly } of importsOf(source)) {
      if (!specifier.startsWith(".")) continue;
      const target = relative(REPO, join(HERE, specifier));
      if (FORBIDDEN.includes(target)) wrong.push(`${e.name} imports ${target}`);
      if (TYPES_ONLY.includes(target) && !typeOnly) {
        wrong.push(`${e.name} imports values from ${target} (types only)`);
      }
    }
  }
  assert.ok(files > 5, `found only ${files} files in ${HERE}`);
  assert.deepEqual(wrong, []);
});
