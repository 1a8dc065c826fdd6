/**
 * Sum JUnit XML reports written by `deno test --junit-path` and print one line
 * `N passed, N failed, N skipped` (the closing line CI reads).
 *
 * @module
 */
import { readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
let skipped = 0;
for (const path of Deno.args) {
  let xml: string;
  try {
    xml = readFileSync(path, "utf8");
  } catch {
    // The runner died before writing its report: count the tier as one failure.
    Deno.stderr.writeSync(
      new TextEncoder().encode(`junit_summary: ${path} is missing; counting it as 1 failed\n`),
    );
    failed++;
    continue;
  }
  for (const m of xml.matchAll(/<testcase\b[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[2] ?? "";
    if (/<failure\b|<error\b/.test(body)) failed++;
    else if (/<skipped\b/.test(body)) skipped++;
    else passed++;
  }
}
Deno.stdout.writeSync(
  new TextEncoder().encode(`${passed} passed, ${failed} failed, ${skipped} skipped\n`),
);
