/**
 * Build one artefact per component.
 *
 * - default: `deno bundle` each component's `command.ts` into `dist/<component>.cjs`, one
 *   self-contained CommonJS file (npm packages included, minified with names kept), and write
 *   `dist/<component>.js`, a few lines that run it; run with `deno run -A dist/<component>.js`. This
 *   works offline once the npm packages are cached, so CI uses it.
 *
 *   Why not one ES module: Deno analyses every ES module it loads with its own parser and keeps
 *   what it found for the life of the process unless its cache dir already holds the analysis —
 *   which the images never have (read-only root, no home): measured, the node plugin's bundle then
 *   idles at 163 MiB instead of 105. A CommonJS bundle run as a function is parsed by V8 alone,
 *   lazily, whatever the cache (docs/benchmarks.md, "memory").
 * - `--compile`: `deno compile` each entrypoint into `dist/bin/s3-csi-<component>`, a standalone
 *   executable for images and users' machines. It downloads the Deno runtime for the target the
 *   first time, so it needs access to the Deno release downloads (not available in CI here).
 *   `--target <triple>` cross-compiles (e.g. aarch64-unknown-linux-gnu).
 * - `S3CSI_VERSION=<version>` (or `--version <version>`): build that version of this tree — the
 *   binaries embed it instead of `deno.json`'s (`src/util/version.ts`): the bundler resolves
 *   `deno.json` to a copy with that version (an import map, {@link versionImportMap}), so one tree
 *   gives two versions to upgrade between (`scripts/build_images_local.ts` tags them with it).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { VERSION_ENV, versionProblem } from "../src/util/version.ts";
import { fromFileUrl } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));

/** The components and their entrypoints. */
export const COMPONENTS = {
  node: "src/cmd/node/main.ts",
  controller: "src/cmd/controller/main.ts",
  mounter: "src/cmd/mounter/main.ts",
} as const;

/** The module each bundle is built from: it exports `main()` (no top-level await). */
export function commandModule(component: keyof typeof COMPONENTS): string {
  return COMPONENTS[component].replace(/main\.ts$/, "command.ts");
}

/** `dist/<component>.js`: run `./<component>.cjs` as a function and exit with its `main()`. */
export function loaderSource(component: keyof typeof COMPONENTS): string {
  return `// s3-csi-${component}: runs ./${component}.cjs (written by scripts/build.ts, see there why).
import { createRequire } from "node:module";
const url = new URL("./${component}.cjs", import.meta.url);
const module = { exports: {} };
new Function("require", "module", "exports", \`\${Deno.readTextFileSync(url)}\\n//# sourceURL=\${url}\`)(
  createRequire(url),
  module,
  module.exports,
);
Deno.exit(await module.exports.main());
`;
}

/**
 * V8 heap limits baked into the compiled binaries (and used by the manifests for bundles): a small
 * young generation and a bounded old generation make V8 collect early instead of growing the heap,
 * which keeps each process well under its memory goal (see docs/benchmarks.md).
 */
export const V8_FLAGS: Record<keyof typeof COMPONENTS, string> = {
  node: "--max-old-space-size=96,--max-semi-space-size=2",
  // 160 MB: the caches of 10,000 pods (slimmed, cache_transforms.ts) need about 100 MB of heap;
  // 64 MB ran out at that scale. A 1 MB semi-space: 4-6 MB less at 2,000 pods, as fast at 2,000
  // and 10,000 (docs/benchmarks.md, "experiments").
  controller: "--max-old-space-size=160,--max-semi-space-size=1",
  mounter: "--max-old-space-size=48,--max-semi-space-size=1",
};

/**
 * The version to build: `--version`, else `S3CSI_VERSION`, else undefined (`deno.json`'s).
 * @throws when it is not a version ({@link versionProblem})
 */
export function buildVersion(
  flag: string | undefined,
  env: string | undefined,
): string | undefined {
  const v = flag ?? (env || undefined);
  if (v === undefined) return undefined;
  const problem = versionProblem(v);
  if (problem) throw new Error(`${flag !== undefined ? "--version" : VERSION_ENV}: ${problem}`);
  return v;
}

/**
 * The import map that builds `version`: `deno.json`'s own imports, and `deno.json` itself resolved
 * to `copy` (a copy of it with that version), which `src/util/version.ts` then imports.
 */
export function versionImportMap(
  denoJson: { imports?: Record<string, string> },
  denoJsonUrl: string,
  copyUrl: string,
): { imports: Record<string, string> } {
  return { imports: { ...denoJson.imports, [denoJsonUrl]: copyUrl } };
}

/** Write the copy of `deno.json` with `version` and its import map under `dir`; the map's path. */
async function writeVersionImportMap(version: string, dir: string): Promise<string> {
  const source = `${ROOT}deno.json`;
  const denoJson = JSON.parse(await Deno.readTextFile(source));
  await Deno.mkdir(dir, { recursive: true });
  const copy = `${dir}/deno.json`;
  await Deno.writeTextFile(copy, JSON.stringify({ ...denoJson, version }, null, 2));
  const map = `${dir}/import_map.json`;
  await Deno.writeTextFile(
    map,
    JSON.stringify(
      versionImportMap(denoJson, pathToFileURL(source).href, pathToFileURL(copy).href),
    ),
  );
  return map;
}

/**
 * glibc malloc settings of the node plugin and controller images (`GLIBC_TUNABLES` in their
 * environment: images/driver.Dockerfile, scripts/build_images_local.ts; the memory and controller
 * benchmarks start the bundles with it too). Blocks of 32 KiB and more are mmapped (given back on
 * free) and the heap's top is trimmed past 32 KiB. Without them glibc keeps what Deno frees: the
 * dynamic mmap threshold rises after the first large free, so later large blocks (parsing the
 * bundle, response bodies, JSON) come from the heap and their pages stay resident once freed.
 * Measured (docs/benchmarks.md, "memory" and "experiments"): node plugin idle 96 → 79 MiB,
 * controller idle 93 → 73 MB and peak at 2,000 pods 122 → 107 MB, attached-after unchanged. glibc
 * reads the variable when the process starts, so it belongs in the image's environment.
 * Not for the mounter: its process becomes the supervisor and the engine, which keep glibc's
 * defaults.
 */
export const GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=32768:glibc.malloc.trim_threshold=32768";

/** The environment variables the images set for `component` (beyond PATH and the CA bundle). */
export function imageEnv(component: keyof typeof COMPONENTS): Record<string, string> {
  return component === "mounter" ? {} : { GLIBC_TUNABLES };
}

const out = (text: string) => Deno.stderr.writeSync(new TextEncoder().encode(`${text}\n`));

async function run(args: string[]): Promise<void> {
  const { code } = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: ROOT,
    stdout: "inherit",
    stderr: "inherit",
  })
    .output();
  if (code !== 0) throw new Error(`deno ${args.join(" ")} failed with exit code ${code}`);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      compile: { type: "boolean" },
      target: { type: "string" },
      only: { type: "string" },
      version: { type: "string" },
    },
  });
  const version = buildVersion(values.version, Deno.env.get(VERSION_ENV));
  const versionArgs = version
    ? ["--import-map", await writeVersionImportMap(version, `${ROOT}dist/.version-${version}`)]
    : [];
  if (version) out(`building version ${version} (not deno.json's)`);
  const names =
    (values.only ? values.only.split(",") : Object.keys(COMPONENTS)) as (keyof typeof COMPONENTS)[];
  for (const name of names) {
    const entry = COMPONENTS[name];
    if (!entry) {
      throw new Error(
        `Unknown component "${name}": choose from ${Object.keys(COMPONENTS).join(", ")}`,
      );
    }
    if (values.compile) {
      const output = `dist/bin/s3-csi-${name}`;
      await run([
        "compile",
        "-A",
        ...(values.target ? ["--target", values.target] : []),
        ...versionArgs,
        "--output",
        output,
        entry,
      ]);
      out(`built ${output}`);
    } else {
      const output = `dist/${name}.cjs`;
      await run([
        "bundle",
        "--quiet",
        "--platform",
        "deno",
        "--packages",
        "bundle",
        "--format",
        "cjs",
        "--minify",
        "--keep-names",
        ...versionArgs,
        "--output",
        output,
        commandModule(name),
      ]);
      await Deno.writeTextFile(`${ROOT}dist/${name}.js`, loaderSource(name));
      out(`built dist/${name}.js and ${output}`);
    }
  }
}
