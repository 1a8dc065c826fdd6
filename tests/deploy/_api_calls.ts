/**
 * Which Kubernetes API calls a binary can make, found by reading its source: the files reachable by
 * static imports from its entrypoint, and in them every `client.<verb>(RESOURCE, …)` call and every
 * `new Informer(client, RESOURCE)` (a list and a watch). RESOURCE must be a `Resource` constant
 * exported by a reachable module; a call whose resource cannot be resolved is reported as
 * unresolved so that a test fails rather than silently under-counting.
 *
 * Why a source scan and not a recorded run: a run against the emulator records only the paths the
 * run happens to take (no leader loss, no stale cleanup, no taint removal unless staged), so RBAC
 * checked against it would either miss grants the binary needs in production or need a scenario per
 * branch. The scan sees every call site the binary contains, at the cost of trusting the call
 * pattern; the unresolved list keeps that trust honest.
 *
 * @module
 */
import { dirname, join, relative } from "node:path";
import { ROOT } from "../_helpers.ts";

/** One permission-relevant call: API group, resource (with subresource) and verb. */
export interface ApiCall {
  readonly group: string;
  readonly resource: string;
  readonly verb: string;
  /** `file:line` of the call site. */
  readonly at: string;
}

/** Result of {@link scanApiCalls}. */
export interface ScanResult {
  readonly files: readonly string[];
  readonly calls: readonly ApiCall[];
  /** Calls on a client whose resource is not a known constant (`file:line: text`). */
  readonly unresolved: readonly string[];
}

interface ResourceLike {
  group: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  version: string;
}

/** Files that implement the client or the informer themselves (their calls use parameters). */
const CLIENT_IMPLEMENTATIONS = new Set([
  "src/kube/rest_client.ts",
  "src/kube/fake_client.ts",
  "src/kube/informer.ts",
  "src/kube/signal_client.ts",
]);

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)"/g;
const CALL =
  /(?:^|[^\w.])(?:[\w#.]*\.)?(#?client|kube)\s*\.\s*(get|list|create|update|patch|delete|watch)\s*(?:<[^()]*?>)?\s*\(/g;
const INFORMER = /new\s+Informer\s*(?:<[^()]*?>)?\s*\(\s*[\w#.]+\s*,\s*([A-Za-z_][\w]*)/g;

async function reachable(entry: string): Promise<string[]> {
  const seen = new Set<string>();
  const stack = [entry];
  while (stack.length) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = await Deno.readTextFile(file);
    for (const m of text.matchAll(IMPORT)) {
      const target = join(dirname(file), m[1]!);
      if (target.startsWith(`${ROOT}src/`) && target.endsWith(".ts")) stack.push(target);
    }
  }
  return [...seen].sort();
}

/** Text of the call's arguments, from the opening parenthesis to its match. */
function argsText(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "(" || c === "{" || c === "[") depth++;
    else if (c === ")" || c === "}" || c === "]") {
      depth--;
      if (depth === 0) return text.slice(open + 1, i);
    }
  }
  return text.slice(open + 1);
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split("\n").length;
}

/** Scan the binary whose entrypoint is `entry` (path relative to the repository root). */
export async function scanApiCalls(entry: string): Promise<ScanResult> {
  const files = await reachable(join(ROOT, entry));
  // Resource constants: every exported value of a reachable module that looks like a Resource.
  const resources = new Map<string, ResourceLike>();
  for (const file of files) {
    const text = await Deno.readTextFile(file);
    if (!/:\s*Resource\b|=\s*core\(/.test(text) || /import\.meta\.main/.test(text)) continue;
    const mod = await import(`file://${file}`) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod)) {
      const r = value as ResourceLike;
      if (r && typeof r === "object" && typeof r.plural === "string" && "namespaced" in r) {
        resources.set(name, r);
      }
    }
  }
  const calls: ApiCall[] = [];
  const unresolved: string[] = [];
  for (const file of files) {
    const rel = relative(ROOT, file);
    if (CLIENT_IMPLEMENTATIONS.has(rel) || rel.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    for (const m of text.matchAll(CALL)) {
      const open = m.index! + m[0].length - 1;
      const args = argsText(text, open);
      const first = args.split(",")[0]!.trim();
      const at = `${rel}:${lineOf(text, m.index!)}`;
      const r = resources.get(first);
      if (!r) {
        unresolved.push(`${at}: ${m[0].trim()}${first})`);
        continue;
      }
      const verb = m[2]!;
      const sub = /subresource:\s*"(\w+)"/.exec(args)?.[1];
      calls.push({ group: r.group, resource: sub ? `${r.plural}/${sub}` : r.plural, verb, at });
    }
    for (const m of text.matchAll(INFORMER)) {
      const at = `${rel}:${lineOf(text, m.index!)}`;
      const r = resources.get(m[1]!);
      if (!r) {
        unresolved.push(`${at}: new Informer(…, ${m[1]})`);
        continue;
      }
      calls.push({ group: r.group, resource: r.plural, verb: "list", at });
      calls.push({ group: r.group, resource: r.plural, verb: "watch", at });
    }
  }
  return { files: files.map((f) => relative(ROOT, f)), calls, unresolved };
}

/** `group/resource` → sorted verbs. */
export function permissionSet(calls: readonly ApiCall[]): Map<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const c of calls) {
    const key = `${c.group}/${c.resource}`;
    if (!out.has(key)) out.set(key, new Set());
    out.get(key)!.add(c.verb);
  }
  return new Map([...out].sort().map(([k, v]) => [k, [...v].sort()]));
}
