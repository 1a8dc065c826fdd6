/**
 * csi-sanity itself: the cached build (`tests/testbed/services/csi_sanity/build.sh`), the list of
 * its specs (a Ginkgo dry run), a run, and its JUnit report read back spec by spec.
 *
 * @module
 */
import { ROOT } from "../_helpers.ts";

/** The build script (prints `CSI_SANITY_BIN=<path>`; exit 3 = cannot build here). */
export const BUILD_SCRIPT = `${ROOT}tests/testbed/services/csi_sanity/build.sh`;

/** Outcome of locating csi-sanity. */
export type SanityBinary =
  | { readonly path: string; readonly version: string }
  | { readonly skip: string }
  | { readonly error: string };

/** The version a csi-sanity binary reports (`csi-sanity -version`). */
async function versionOf(path: string): Promise<string> {
  const out = await new Deno.Command(path, { args: ["-version"], stdout: "piped", stderr: "null" })
    .output();
  return /Version = (\S+)/.exec(new TextDecoder().decode(out.stdout))?.[1] ?? "unknown";
}

/** `CSI_SANITY_BIN` when set, else the build script's answer. */
export async function csiSanityBinary(): Promise<SanityBinary> {
  const fromEnv = Deno.env.get("CSI_SANITY_BIN");
  if (fromEnv) return { path: fromEnv, version: await versionOf(fromEnv) };
  const out = await new Deno.Command("bash", {
    args: [BUILD_SCRIPT],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr).trim();
  const last = stderr.split("\n").at(-1) ?? "";
  if (out.code === 3) return { skip: `csi-sanity cannot be built here: ${last}` };
  const path = /^CSI_SANITY_BIN=(.+)$/m.exec(stdout)?.[1];
  if (out.code !== 0 || !path) {
    return { error: `${BUILD_SCRIPT} failed (exit ${out.code}): ${stderr.slice(-2000)}` };
  }
  return { path, version: await versionOf(path) };
}

/** One spec of a JUnit report. */
export interface SpecResult {
  /** Full spec text without Ginkgo's `[It] ` prefix. */
  readonly name: string;
  readonly status: "passed" | "failed" | "skipped" | "pending";
  /** Failure or skip message (first lines). */
  readonly message: string;
  readonly seconds: number;
}

function unescapeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#\d+|lt|gt|amp|quot|apos);/g, (_, e: string) => {
    if (e === "lt") return "<";
    if (e === "gt") return ">";
    if (e === "amp") return "&";
    if (e === "quot") return '"';
    if (e === "apos") return "'";
    return String.fromCodePoint(
      e.startsWith("#x") ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10),
    );
  });
}

function attr(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}="([^"]*)"`).exec(tag);
  return m ? unescapeXml(m[1]!) : undefined;
}

/** Read a Ginkgo JUnit report (one `<testcase>` per spec; suite nodes are left out). */
export function parseJUnit(xml: string): SpecResult[] {
  const out: SpecResult[] = [];
  const re = /<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g;
  for (const m of xml.matchAll(re)) {
    const head = m[1]!;
    const body = m[2] ?? "";
    const rawName = attr(head, "name") ?? "";
    if (!rawName.startsWith("[It] ")) continue; // [BeforeSuite], [ReportAfterSuite], ...
    const status = attr(head, "status") as SpecResult["status"] | undefined;
    const failure = /<(?:failure|error)\b([^>]*)>/.exec(body);
    const skipped = /<skipped\b([^>]*)>/.exec(body);
    const message = failure
      ? attr(failure[1]!, "message") ?? ""
      : skipped
      ? (attr(skipped[1]!, "message") ?? "").replace(/^skipped - /, "")
      : "";
    out.push({
      name: rawName.slice("[It] ".length),
      status: status ?? "failed",
      message,
      seconds: Number(attr(head, "time") ?? 0),
    });
  }
  return out;
}

/** Every spec csi-sanity has, from a dry run (nothing is called). */
export async function listSpecs(bin: string, dir: string): Promise<SpecResult[]> {
  const report = `${dir}/dry-run.xml`;
  const out = await new Deno.Command(bin, {
    args: [
      "--csi.endpoint=unix:///nonexistent",
      "--ginkgo.dry-run",
      `--ginkgo.junit-report=${report}`,
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(`csi-sanity dry run failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return parseJUnit(await Deno.readTextFile(report));
}

/** A finished csi-sanity run. */
export interface SanityRun {
  readonly code: number;
  readonly specs: SpecResult[];
  /** Ginkgo's console output (colours off). */
  readonly output: string;
  readonly seconds: number;
}

/** Run csi-sanity with `args` (plus its JUnit report) and read the report. */
export async function runSanity(
  bin: string,
  args: string[],
  options: { reportPath: string; env: Record<string, string>; timeoutMs: number },
): Promise<SanityRun> {
  const t0 = performance.now();
  const child = new Deno.Command(bin, {
    args: [...args, `--ginkgo.junit-report=${options.reportPath}`, "--ginkgo.no-color"],
    env: options.env,
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }, options.timeoutMs);
  const out = await child.output();
  clearTimeout(timer);
  const d = new TextDecoder();
  const output = d.decode(out.stdout) + d.decode(out.stderr);
  const seconds = (performance.now() - t0) / 1000;
  let xml: string;
  try {
    xml = await Deno.readTextFile(options.reportPath);
  } catch {
    throw new Error(
      `csi-sanity wrote no report (exit ${out.code}${out.signal ? `, ${out.signal}` : ""}` +
        ` after ${Math.round(seconds)} s): ${output.slice(-3000)}`,
    );
  }
  return { code: out.code, specs: parseJUnit(xml), output, seconds };
}
