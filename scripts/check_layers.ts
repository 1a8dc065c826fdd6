/**
 * The dependency rules of the whole repository, checked by `deno task ok` (`deno task layers`).
 *
 * `src/` (what ships):
 *
 * 1. nothing under `src/` imports `tests/` or `scripts/`: `src/` holds only what ships;
 * 2. a feature folder (`node/`, `controller/`, `mounter/`, `provisioning/`, `deploy/`) never
 *    imports another feature folder: shared code moves down;
 * 3. a folder imports only folders of a lower layer (below), never a higher one or a peer.
 *
 * `tests/` and `scripts/`:
 *
 * 4. a tier (a folder of `tests/` other than the shared ones below) never imports another tier:
 *    what two tiers use lives in the shared home, `tests/testbed/` (harnesses in
 *    `tests/testbed/harness/`), and a `_`-prefixed module is private to its tier;
 * 5. the shared code of `tests/` — `tests/testbed/`, `tests/scenarios/` and the modules directly in
 *    `tests/` — never imports a tier;
 * 6. `scripts/` (tool libraries and entrypoints) never imports `tests/`.
 *
 * Everywhere:
 *
 * 7. no import cycle between modules, type-only imports included.
 *
 * Layers of `src/`, lowest first: `util/` · `sys/` `s3/` `kube/` (boundaries) · `api/` · `csi/`
 * `mppod/` · `options/` · feature folders · `cmd/`. A folder of `src/` missing from this table is
 * an error, so a new folder gets a place on purpose.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

/** Layer of each top-level folder of `src/`; a folder may import only lower layers. */
export const LAYERS: Readonly<Record<string, number>> = {
  util: 0,
  sys: 1,
  s3: 1,
  kube: 1,
  api: 2,
  csi: 3,
  mppod: 3,
  options: 4,
  node: 5,
  controller: 5,
  mounter: 5,
  provisioning: 5,
  deploy: 5,
  cmd: 6,
};

/** Folders that hold one binary's (or the deploy CLI's) own logic. */
export const FEATURES: ReadonlySet<string> = new Set([
  "node",
  "controller",
  "mounter",
  "provisioning",
  "deploy",
]);

/** Folders of `tests/` that every tier may use; they never import a tier. */
export const TESTS_SHARED: ReadonlySet<string> = new Set(["testbed", "scenarios"]);

/** One broken rule. */
export interface LayerViolation {
  readonly file: string;
  readonly imports: string;
  readonly problem: string;
}

const IMPORT_REGEXP =
  /(?:^|[\s;])(?:import|export)\s*(?:type\s+)?(?:[^"';]*?\s+from\s+)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

/** Relative import specifiers of a module's source (static, re-exports and dynamic). */
export function importSpecifiers(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(IMPORT_REGEXP)) {
    const spec = m[1] ?? m[2];
    if (spec && (spec.startsWith("./") || spec.startsWith("../"))) out.push(spec);
  }
  return out;
}

function resolve(from: string, spec: string): string {
  const parts = from.split("/").slice(0, -1);
  for (const s of spec.split("/")) {
    if (s === "..") parts.pop();
    else if (s !== ".") parts.push(s);
  }
  return parts.join("/");
}

function srcFolder(path: string): string | undefined {
  const m = /^src\/([^/]+)\//.exec(path);
  return m?.[1];
}

/**
 * Where a module lives, for the rules: a folder of `src/`, `scripts`, a tier of `tests/`, or the
 * shared code of `tests/` (`tests/testbed/`, `tests/scenarios/`, the modules directly in
 * `tests/`). Undefined outside these trees.
 */
export type Zone =
  | { readonly kind: "src"; readonly folder: string }
  | { readonly kind: "scripts" }
  | { readonly kind: "tier"; readonly tier: string }
  | { readonly kind: "shared"; readonly folder: string };

/** The {@link Zone} of a repository-relative path. */
export function zoneOf(path: string): Zone | undefined {
  const folder = srcFolder(path);
  if (folder !== undefined) return { kind: "src", folder };
  if (path.startsWith("scripts/")) return { kind: "scripts" };
  const t = /^tests\/(?:([^/]+)\/)?[^/]+$/.exec(path) ?? /^tests\/([^/]+)\//.exec(path);
  if (!t) return undefined;
  const top = t[1];
  if (top === undefined) return { kind: "shared", folder: "tests" };
  if (TESTS_SHARED.has(top)) return { kind: "shared", folder: top };
  return { kind: "tier", tier: top };
}

/**
 * Check a set of modules, given as repository-relative path → source text (`src/`, `tests/`,
 * `scripts/`); modules outside these trees may be given so that imports of them resolve.
 */
export function checkLayers(modules: ReadonlyMap<string, string>): LayerViolation[] {
  const violations: LayerViolation[] = [];
  const graph = new Map<string, string[]>();
  const seenFolders = new Set<string>();
  for (const [file, source] of modules) {
    const from = zoneOf(file);
    if (from === undefined) continue;
    if (from.kind === "src" && !(from.folder in LAYERS) && !seenFolders.has(from.folder)) {
      seenFolders.add(from.folder);
      violations.push({
        file,
        imports: "",
        problem: `src/${from.folder}/ has no layer: add it to LAYERS in scripts/check_layers.ts`,
      });
    }
    const edges: string[] = [];
    for (const spec of importSpecifiers(source)) {
      const target = resolve(file, spec);
      const problem = edgeProblem(from, target);
      if (problem) violations.push({ file, imports: spec, problem });
      if (modules.has(target)) edges.push(target);
    }
    graph.set(file, edges);
  }
  for (const cycle of cycles(graph)) {
    violations.push({
      file: cycle[0]!,
      imports: cycle[1]!,
      problem: `import cycle: ${[...cycle, cycle[0]].join(" → ")}`,
    });
  }
  return violations;
}

/** Violations not in `allowed` (`file → specifier` keys), and allowlist entries that match none. */
export function unexpected(
  violations: readonly LayerViolation[],
  allowed: ReadonlySet<string>,
): { readonly violations: LayerViolation[]; readonly stale: string[] } {
  const keys = new Set(violations.map(allowKey));
  return {
    violations: violations.filter((v) => !allowed.has(allowKey(v))),
    stale: [...allowed].filter((k) => !keys.has(k)),
  };
}

/** The allowlist key of a violation: `file → specifier`. */
export function allowKey(v: LayerViolation): string {
  return `${v.file} → ${v.imports}`;
}

function edgeProblem(from: Zone, target: string): string | undefined {
  const to = zoneOf(target);
  if (to === undefined) return undefined;
  if (from.kind === "src") {
    if (target.startsWith("tests/")) {
      return "src/ must not import tests/ (the testbed never ships): move the code into src/ or invert the dependency";
    }
    if (to.kind === "scripts") {
      return "src/ must not import scripts/ (tools never ship): move the code into src/";
    }
    if (to.kind !== "src" || to.folder === from.folder) return undefined;
    if (FEATURES.has(from.folder) && FEATURES.has(to.folder)) {
      return `feature folder ${from.folder}/ imports feature folder ${to.folder}/: move the shared code down (csi/, api/, mppod/, options/, kube/, s3/, sys/, util/)`;
    }
    const a = LAYERS[from.folder];
    const b = LAYERS[to.folder];
    if (a === undefined || b === undefined) return undefined; // reported per folder
    if (b >= a) {
      return `${from.folder}/ (layer ${a}) imports ${to.folder}/ (layer ${b}): a folder imports only lower layers`;
    }
    return undefined;
  }
  if (from.kind === "scripts") {
    return target.startsWith("tests/")
      ? "scripts/ must not import tests/: move what both need into scripts/ (a tool library the testbed may import) or the tool into tests/"
      : undefined;
  }
  if (to.kind !== "tier") return undefined;
  if (from.kind === "shared") {
    return `${
      from.folder === "tests" ? "tests/" : `tests/${from.folder}/`
    } is shared by the tiers and must not import the tier ${to.tier}/: move what it needs into tests/testbed/`;
  }
  if (from.tier !== to.tier) {
    const name = target.split("/").at(-1) ?? "";
    return `tier ${from.tier}/ imports tier ${to.tier}/${
      name.startsWith("_") ? ` (${name} is private to it)` : ""
    }: move the shared code into tests/testbed/harness/`;
  }
  return undefined;
}

/** Every elementary cycle's representative: one cycle per strongly connected component. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, idx.get(w)!));
      }
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      const self = (graph.get(v) ?? []).includes(v);
      if (scc.length > 1 || self) out.push(pathIn(graph, new Set(scc), v));
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) visit(v);
  return out;
}

/** A concrete cycle through `start` inside one strongly connected component. */
function pathIn(
  graph: ReadonlyMap<string, readonly string[]>,
  scc: ReadonlySet<string>,
  start: string,
): string[] {
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!scc.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(prev.get(path[0]!)!);
        return path;
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/**
 * Known violations, `file → specifier`, being removed (issue 26). An entry that no longer matches
 * a violation fails the check: remove it.
 */
export const ALLOWED: ReadonlySet<string> = new Set([]);

async function readModules(root: string): Promise<Map<string, string>> {
  const modules = new Map<string, string>();
  const skip = new Set(["gen", "node_modules", "vendor", "target"]);
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(`${root}/${dir}`)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory && !skip.has(e.name)) await walk(path);
      else if (e.isFile && e.name.endsWith(".ts")) {
        modules.set(path, await Deno.readTextFile(`${root}/${path}`));
      }
    }
  };
  for (const top of ["src", "tests", "scripts"]) await walk(top);
  return modules;
}

const say = (text: string) => Deno.stderr.writeSync(new TextEncoder().encode(`${text}\n`));

if (import.meta.main) {
  const root = fileURLToPath(new URL("../", import.meta.url)).replace(/\/$/, "");
  const modules = await readModules(root);
  const all = checkLayers(modules);
  const { violations, stale } = unexpected(all, ALLOWED);
  for (const v of violations) {
    say(`${v.file}${v.imports ? ` → ${v.imports}` : ""}: ${v.problem}`);
  }
  for (const k of stale) say(`${k}: no longer a violation: remove it from ALLOWED`);
  const known = all.length - violations.length;
  const where = `${modules.size} modules of src/, tests/ and scripts/`;
  if (violations.length || stale.length) {
    say(`layers: ${violations.length + stale.length} problem(s) in ${where}`);
    Deno.exit(1);
  }
  say(`layers: ok (${where}${known ? `; ${known} known violation(s) being removed` : ""})`);
}
