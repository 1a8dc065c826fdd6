/**
 * Sum the JUnit XML reports written by `deno test --junit-path` and print the closing lines of
 * `deno task test`: tests and their steps (`t.step`) counted apart — Deno writes one `<testcase>`
 * per step, named `parent > step`, so counting testcases would count every step as a test — then
 * every skipped test with its reason (our skipped tests carry it in their names), and last
 * `N passed, N failed, N skipped` for the tests (the line CI reads).
 *
 * Usage: `junit_summary.ts [--fail-on-skip] report.xml...` — exit 1 when a test or step failed,
 * when a report is missing (its runner died: the tier counts as one failed test), or, with
 * `--fail-on-skip` (CI), when anything was skipped.
 *
 * @module
 */
import { readFileSync } from "node:fs";

/** Counts of one kind of case. */
export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

/** One testcase of a report. */
export interface Case {
  /** File (`classname`). */
  readonly file: string;
  readonly name: string;
  readonly outcome: "passed" | "failed" | "skipped";
  /** True for a `t.step` (its name extends another case's name with ` > `). */
  readonly step: boolean;
}

/** Summary of a set of reports. */
export interface Summary {
  readonly tests: Counts;
  readonly steps: Counts;
  readonly cases: readonly Case[];
}

function unescapeXml(s: string): string {
  return s.replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&quot;", '"')
    .replaceAll("&apos;", "'").replaceAll("&amp;", "&");
}

/** The testcases of one JUnit document, steps marked. */
export function parseJunit(xml: string): Case[] {
  const raw: { file: string; name: string; outcome: Case["outcome"] }[] = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attrs = m[1] ?? "";
    const name = unescapeXml(/\bname="([^"]*)"/.exec(attrs)?.[1] ?? "");
    const file = unescapeXml(/\bclassname="([^"]*)"/.exec(attrs)?.[1] ?? "");
    const body = m[3] ?? "";
    const outcome = /<failure\b|<error\b/.test(body)
      ? "failed"
      : /<skipped\b/.test(body)
      ? "skipped"
      : "passed";
    raw.push({ file, name, outcome });
  }
  // A step's classname is the file that called t.step, which is not always the file that
  // registered its test (a helper may): match parents by name across the whole report.
  const names = new Set(raw.map((c) => c.name));
  return raw.map((c) => {
    // "a > b > c" is a step when "a > b" (or "a") is a case of the report.
    let step = false;
    for (let i = c.name.lastIndexOf(" > "); i > 0; i = c.name.lastIndexOf(" > ", i - 1)) {
      if (names.has(c.name.slice(0, i))) {
        step = true;
        break;
      }
    }
    return { ...c, step };
  });
}

/** Sum cases into test and step counts. */
export function summarize(cases: readonly Case[]): Summary {
  const tests: Counts = { passed: 0, failed: 0, skipped: 0 };
  const steps: Counts = { passed: 0, failed: 0, skipped: 0 };
  for (const c of cases) (c.step ? steps : tests)[c.outcome]++;
  return { tests, steps, cases };
}

function line(c: Counts): string {
  return `${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`;
}

/** The printed summary (ends with the tests' counts line). */
export function render(s: Summary, missing: readonly string[]): string {
  const out: string[] = [];
  for (const path of missing) out.push(`report missing (its runner died): ${path}`);
  const skipped = s.cases.filter((c) => c.outcome === "skipped");
  if (skipped.length) {
    out.push(`skipped (${skipped.length}):`);
    for (const c of skipped) out.push(`  - ${c.file.replace(/^\.\//, "")}: ${c.name}`);
  }
  const failed = s.cases.filter((c) => c.outcome === "failed" && !c.step);
  if (failed.length) {
    out.push(`failed tests (${failed.length}):`);
    for (const c of failed) out.push(`  - ${c.file.replace(/^\.\//, "")}: ${c.name}`);
  }
  out.push(`steps (t.step, counted apart): ${line(s.steps)}`);
  out.push(line(s.tests));
  return `${out.join("\n")}\n`;
}

/** Exit code: 1 on a failure or missing report, and on any skip with `failOnSkip`. */
export function exitCode(s: Summary, missing: readonly string[], failOnSkip: boolean): number {
  if (missing.length || s.tests.failed || s.steps.failed) return 1;
  if (failOnSkip && (s.tests.skipped || s.steps.skipped)) return 1;
  return 0;
}

if (import.meta.main) {
  const failOnSkip = Deno.args.includes("--fail-on-skip");
  const paths = Deno.args.filter((a) => a !== "--fail-on-skip");
  const cases: Case[] = [];
  const missing: string[] = [];
  for (const path of paths) {
    let xml: string;
    try {
      xml = readFileSync(path, "utf8");
    } catch {
      missing.push(path);
      continue;
    }
    cases.push(...parseJunit(xml));
  }
  const s = summarize(cases);
  // A tier whose runner died wrote no report: one failed test for it.
  s.tests.failed += missing.length;
  Deno.stdout.writeSync(new TextEncoder().encode(render(s, missing)));
  Deno.exit(exitCode(s, missing, failOnSkip));
}
