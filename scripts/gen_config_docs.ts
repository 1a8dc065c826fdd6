/**
 * Render `docs/configuration.md`, the configuration reference of every binary, from the option
 * specs the binaries parse (so the documentation cannot drift from the code).
 *
 * Usage: `deno run -A scripts/gen_config_docs.ts [--out DIR]` (DIR defaults to docs).
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { OptionSpec, OptionSpecs } from "../src/util/config.ts";
import { LOG_OPTIONS } from "../src/util/log.ts";
import { NODE_OPTIONS } from "../src/options/node_options.ts";
import { CONTROLLER_OPTIONS } from "../src/options/controller_options.ts";
import { MOUNTER_OPTIONS } from "../src/options/mounter_options.ts";
import { fromFileUrl, generatedHeader, writeGenerated } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));

const BINARIES: readonly { name: string; summary: string; options: OptionSpecs }[] = [
  { name: "s3-csi-node", summary: "CSI node plugin (DaemonSet)", options: NODE_OPTIONS },
  { name: "s3-csi-controller", summary: "Controller (Deployment)", options: CONTROLLER_OPTIONS },
  { name: "s3-csi-mounter", summary: "Mountpoint Pod entrypoint", options: MOUNTER_OPTIONS },
];

function formatDefault(spec: OptionSpec): string {
  if (spec.required) return "(required)";
  if (spec.default === undefined || spec.default === "") return "";
  if (spec.type === "duration" && typeof spec.default === "number") {
    const ms = spec.default;
    return ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
  }
  return String(spec.default);
}

function table(options: OptionSpecs): string {
  const rows = Object.entries(options).map(([name, spec]) => {
    const choices = spec.choices
      ? ` One of: ${spec.choices.map((c) => `\`${c}\``).join(", ")}.`
      : "";
    const def = formatDefault(spec);
    return `| \`--${name}\` | ${spec.env ? `\`${spec.env}\`` : ""} | ${
      def ? `\`${def}\`` : ""
    } | ${spec.type} | ${spec.description.replaceAll("|", "\\|")}.${choices} |`;
  });
  return ["| flag | env | default | type | meaning |", "|---|---|---|---|---|", ...rows].join("\n");
}

/** The document. */
export function configurationDoc(): string {
  const parts = [
    `<!-- ${generatedHeader("scripts/gen_config_docs.ts", "").trim().replaceAll("\n", " ")} -->`,
    "# Configuration reference",
    "",
    "Every setting is a flag; most also read an environment variable. A flag wins over its environment",
    "variable, which wins over the default. Durations accept `500ms`, `30s`, `2m`, `1h`; booleans accept",
    "`--flag`, `--flag=true` and `--flag=false`. An invalid value stops start-up with exit code 2 and one",
    "line naming the flag, its variable and the problem.",
    "",
    "## All binaries",
    "",
    table(LOG_OPTIONS),
    "",
  ];
  for (const b of BINARIES) parts.push(`## \`${b.name}\`: ${b.summary}`, "", table(b.options), "");
  return parts.join("\n");
}

/** Write the document into `outDir`; returns the paths written. */
export function generateConfigDocs(outDir: string): string[] {
  return [writeGenerated(`${outDir}/configuration.md`, configurationDoc())];
}

if (import.meta.main) {
  const { values } = parseArgs({ args: Deno.args, options: { out: { type: "string" } } });
  for (const p of generateConfigDocs(values.out ?? `${ROOT}docs`)) {
    Deno.stderr.writeSync(new TextEncoder().encode(`wrote ${p}\n`));
  }
}
