/**
 * The layering rule of `src/`, checked by `deno task ok` (`deno task layers`):
 *
 * 1. nothing under `src/` imports `tests/` (the testbed included): `src/` holds only what ships;
 * 2. a feature folder (`node/`, `controller/`, `mounter/`, `provisioning/`, `deploy/`) never
 *    imports another feature folder: shared code moves down;
 * 3. a folder imports only folders of a lower layer (below), never a higher one or a peer;
 * 4. no import cycle between modules of `src/`.
 *
 * Layers, lowest first: `util/` · `sys/` `s3/` `kube/` (boundaries) · `api/` · `csi/` `mppod/` ·
 * `options/` · feature folders · `cmd/`. A folder of `src/` missing from this table is an error,
 * so a new folder gets a place on purpose.
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
 * Check a set of modules, given as repository-relative path → source text. Only modules under
 * `src/` are judged; others may be given so that imports of them resolve.
 */
export function checkLayers(modules: ReadonlyMap<string, string>): LayerViolation[] {
  const violations: LayerViolation[] = [];
  const graph = new Map<string, string[]>();
  for (const [file, source] of modules) {
    const from = srcFolder(file);
    if (from === undefined) continue;
    if (!(from in LAYERS)) {
      violations.push({
        file,
        imports: "",
        problem: `src/${from}/ has no layer: add it to LAYERS in scripts/check_layers.ts`,
      });
    }
    const edges: string[] = [];
    for (const spec of importSpecifiers(source)) {
      const target = resolve(file, spec);
      const problem = edgeProblem(from, target);
      if (problem) violations.push({ file, imports: spec, problem });
      if (target.startsWith("src/")) edges.push(target);
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

function edgeProblem(from: string, target: string): string | undefined {
  if (target.startsWith("tests/")) {
    return "src/ must not import tests/ (the testbed never ships): move the code into src/ or invert the dependency";
  }
  if (!target.startsWith("src/")) return undefined;
  const to = srcFolder(target);
  if (to === undefined || to === from) return undefined;
  if (FEATURES.has(from) && FEATURES.has(to)) {
    return `feature folder ${from}/ imports feature folder ${to}/: move the shared code down (csi/, api/, mppod/, options/, kube/, s3/, sys/, util/)`;
  }
  const a = LAYERS[from];
  const b = LAYERS[to];
  if (a === undefined || b === undefined) return undefined; // reported per folder
  if (b >= a) {
    return `${from}/ (layer ${a}) imports ${to}/ (layer ${b}): a folder imports only lower layers`;
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

async function readModules(root: string): Promise<Map<string, string>> {
  const modules = new Map<string, string>();
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(`${root}/${dir}`)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory && e.name !== "gen") await walk(path);
      else if (e.isFile && e.name.endsWith(".ts")) {
        modules.set(path, await Deno.readTextFile(`${root}/${path}`));
      }
    }
  };
  await walk("src");
  return modules;
}

const say = (text: string) => Deno.stderr.writeSync(new TextEncoder().encode(`${text}\n`));

if (import.meta.main) {
  const root = fileURLToPath(new URL("../", import.meta.url)).replace(/\/$/, "");
  const modules = await readModules(root);
  const violations = checkLayers(modules);
  for (const v of violations) {
    say(`${v.file}${v.imports ? ` → ${v.imports}` : ""}: ${v.problem}`);
  }
  if (violations.length) {
    say(`layers: ${violations.length} violation(s) in ${modules.size} modules of src/`);
    Deno.exit(1);
  }
  say(`layers: ok (${modules.size} modules of src/)`);
}
