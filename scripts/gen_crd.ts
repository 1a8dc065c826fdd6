/**
 * Render `k8s/crds/*.yaml` from the CRD definitions in `src/api/`.
 *
 * Usage: `deno run -A scripts/gen_crd.ts [--out DIR]` (DIR defaults to k8s/crds).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { S3PA_CRD_NAME, s3paCrd } from "../src/api/mountpoint_s3_pod_attachment.ts";
import { fromFileUrl, generatedHeader, writeGenerated } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));

/** The CRDs to render: file name → object. */
export function crdDocuments(): Record<string, Record<string, unknown>> {
  return { [`${S3PA_CRD_NAME}.yaml`]: s3paCrd() };
}

/** Render every CRD into `outDir`; returns the paths written. */
export function generateCrds(outDir: string): string[] {
  return Object.entries(crdDocuments()).map(([file, doc]) =>
    writeGenerated(
      `${outDir}/${file}`,
      `${generatedHeader("scripts/gen_crd.ts", "#")}${
        stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false })
      }`,
    )
  );
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { out: { type: "string" } } });
  for (const p of generateCrds(values.out ?? `${ROOT}k8s/crds`)) {
    Deno.stderr.writeSync(new TextEncoder().encode(`wrote ${p}\n`));
  }
}
