/**
 * `deno task gen:check`: regenerate every generated file into a temporary folder and fail when the
 * committed copy differs (someone edited a generated file or forgot `deno task gen`).
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { generateProto } from "./gen_proto.ts";
import { generateCrds } from "./gen_crd.ts";
import { generateDeploy } from "./gen_deploy.ts";
import { generateConfigDocs } from "./gen_config_docs.ts";
import { generateMountOptions } from "./gen_mount_options.ts";
import { fromFileUrl } from "./_gen_util.ts";

const ROOT = fromFileUrl(new URL("../", import.meta.url));

interface Target {
  readonly committed: string;
  readonly generate: (dir: string) => string[] | Promise<string[]>;
  /** The folder also holds hand-written files: compare only what the generator writes. */
  readonly only?: boolean;
}

const TARGETS: readonly Target[] = [
  { committed: `${ROOT}src/csi/gen`, generate: generateProto },
  { committed: `${ROOT}k8s/crds`, generate: generateCrds },
  { committed: `${ROOT}k8s/deploy`, generate: generateDeploy },
  { committed: `${ROOT}docs`, generate: generateConfigDocs, only: true },
  // The engine's option table and the README's, from src/mppod/mount_option_spec.ts.
  { committed: ROOT.replace(/\/$/, ""), generate: generateMountOptions, only: true },
];

function read(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

const problems: string[] = [];
for (const target of TARGETS) {
  const tmp = Deno.makeTempDirSync({ prefix: "s3csi-gen-" });
  try {
    const fresh = new Set((await target.generate(tmp)).map((p) => p.slice(tmp.length + 1)));
    for (const name of fresh) {
      const want = read(`${tmp}/${name}`);
      const have = read(`${target.committed}/${name}`);
      if (have === undefined) problems.push(`${target.committed}/${name} is missing`);
      else if (have !== want) {
        problems.push(`${target.committed}/${name} differs from its generator`);
      }
    }
    for (const name of target.only ? [] : readdirSync(target.committed)) {
      if (!fresh.has(name)) {
        problems.push(`${target.committed}/${name} is not produced by any generator`);
      }
    }
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
}
const out = new TextEncoder();
if (problems.length) {
  Deno.stderr.writeSync(
    out.encode(
      `Generated files drifted:\n- ${problems.join("\n- ")}\nRun \`deno task gen\` and commit.\n`,
    ),
  );
  Deno.exit(1);
}
Deno.stderr.writeSync(out.encode("Generated files are up to date\n"));
