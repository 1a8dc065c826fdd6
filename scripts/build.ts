/**
 * Build one artefact per component.
 *
 * - default: `deno bundle` each entrypoint into `dist/<component>.js` (one self-contained file,
 *   npm packages included); run with `deno run -A dist/<component>.js`. This works offline once the
 *   npm packages are cached, so CI uses it.
 * - `--compile`: `deno compile` each entrypoint into `dist/bin/s3-csi-<component>`, a standalone
 *   executable for images and users' machines. It downloads the Deno runtime for the target the
 *   first time, so it needs access to the Deno release downloads (not available in CI here).
 *   `--target <triple>` cross-compiles (e.g. aarch64-unknown-linux-gnu).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { fromFileUrl } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));

/** The components and their entrypoints. */
export const COMPONENTS = {
  node: "src/cmd/node/main.ts",
  controller: "src/cmd/controller/main.ts",
  mounter: "src/cmd/mounter/main.ts",
} as const;

/**
 * V8 heap limits baked into the compiled binaries (and used by the manifests for bundles): a small
 * young generation and a bounded old generation make V8 collect early instead of growing the heap,
 * which keeps each process well under its memory goal (see docs/benchmarks.md).
 */
export const V8_FLAGS: Record<keyof typeof COMPONENTS, string> = {
  node: "--max-old-space-size=96,--max-semi-space-size=2",
  // 160 MB: the caches of 10,000 pods (slimmed, cache_transforms.ts) need about 100 MB of heap;
  // 64 MB ran out at that scale (docs/benchmarks.md).
  controller: "--max-old-space-size=160,--max-semi-space-size=4",
  mounter: "--max-old-space-size=48,--max-semi-space-size=1",
};

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
    options: { compile: { type: "boolean" }, target: { type: "string" }, only: { type: "string" } },
  });
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
        "--output",
        output,
        entry,
      ]);
      out(`built ${output}`);
    } else {
      const output = `dist/${name}.js`;
      await run([
        "bundle",
        "--quiet",
        "--platform",
        "deno",
        "--packages",
        "bundle",
        "--output",
        output,
        entry,
      ]);
      out(`built ${output}`);
    }
  }
}
