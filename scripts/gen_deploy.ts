/**
 * Render `k8s/deploy/s3-csi-driver.yaml` from the default values (`src/deploy/`); `deno task
 * gen:check` fails when the committed copy drifts from the generator.
 *
 * Usage: `deno run -A scripts/gen_deploy.ts [--out DIR]` (DIR defaults to k8s/deploy).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { RENDERED_FILE } from "../src/deploy/cli.ts";
import { renderManifests, toYaml } from "../src/deploy/render.ts";
import { resolveValues } from "../src/deploy/values_validate.ts";
import { fromFileUrl, generatedHeader, writeGenerated } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));

/** Render the default deployment into `outDir`; returns the paths written. */
export function generateDeploy(outDir: string): string[] {
  const header = `${generatedHeader("scripts/gen_deploy.ts", "#")}` +
    "# Defaults of src/deploy/values.ts; for other values run `deno task render --values <file>`.\n";
  return [
    writeGenerated(`${outDir}/${RENDERED_FILE}`, toYaml(renderManifests(resolveValues()), header)),
  ];
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { out: { type: "string" } } });
  for (const p of generateDeploy(values.out ?? `${ROOT}k8s/deploy`)) {
    Deno.stderr.writeSync(new TextEncoder().encode(`wrote ${p}\n`));
  }
}
