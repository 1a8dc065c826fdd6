/**
 * The `render`, `deploy` and `undeploy` commands: values → manifests → cluster, with one status
 * summary at the end. Entrypoints in `src/cmd/{render,deploy,undeploy}/main.ts` only call these.
 *
 * Exit codes: 0 done; 2 invalid values or flags (nothing was applied); 1 the API refused
 * something; 3 applied, but the rollout did not complete within `--wait-timeout`; 4 undeploy
 * refused because volumes are mounted.
 *
 * @module
 */
import { loadCliKubeConfig } from "../kube/kube_config.ts";
import { RestKubeClient } from "../kube/rest_client.ts";
import type { ParsedConfig } from "../util/config.ts";
import { EXIT_CONFIG } from "../util/errors.ts";
import { writeStderr, writeStdout } from "../util/stdio.ts";
import { DRIVER_NAME, DRIVER_VERSION } from "../util/version.ts";
import { deploy } from "./apply.ts";
import { checkServerVersion } from "./server_version.ts";
import type { DEPLOY_OPTIONS, RENDER_OPTIONS, UNDEPLOY_OPTIONS } from "./cli_options.ts";
import type { Manifest } from "./k8s_objects.ts";
import { renderManifests, toYaml } from "./render.ts";
import { undeploy, VolumesMountedError } from "./undeploy.ts";
import { loadValues } from "./values_load.ts";
import { ValuesError } from "./values_validate.ts";

/** Exit code: applied, rollout incomplete. */
export const EXIT_ROLLOUT_INCOMPLETE = 3;
/** Exit code: undeploy refused (volumes mounted). */
export const EXIT_VOLUMES_MOUNTED = 4;
/** File name written by `render --out <dir>`. */
export const RENDERED_FILE = "s3-csi-driver.yaml";

/** Values and manifests, or an exit code after printing every values problem. */
function manifests(
  config: {
    values?: string | undefined;
    set?: string | undefined;
    "driver-version"?: string | undefined;
  },
): Manifest[] | number {
  try {
    return renderManifests(loadValues(config.values, config.set, config["driver-version"]));
  } catch (err) {
    if (err instanceof ValuesError) {
      writeStderr(`error: ${err.message}\nNothing was applied.\n`);
      return EXIT_CONFIG;
    }
    throw err;
  }
}

function client(config: {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  "allow-insecure-http": boolean;
}) {
  const loaded = loadCliKubeConfig({
    ...(config.kubeconfig ? { kubeconfig: config.kubeconfig } : {}),
    ...(config.context ? { context: config.context } : {}),
    allowHttp: config["allow-insecure-http"],
    stdinIsTerminal: Deno.stdin.isTerminal(),
  });
  return {
    client: new RestKubeClient(loaded.config, { userAgent: `s3-csi-deploy/${DRIVER_VERSION}` }),
    source: loaded.source,
    server: loaded.server,
  };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/** `deno task render`. */
export function runRender(config: ParsedConfig<typeof RENDER_OPTIONS>): Promise<number> {
  const objects = manifests(config);
  if (typeof objects === "number") return Promise.resolve(objects);
  const yaml = toYaml(objects);
  if (config.out === "-") writeStdout(yaml);
  else {
    Deno.mkdirSync(config.out, { recursive: true });
    Deno.writeTextFileSync(`${config.out}/${RENDERED_FILE}`, yaml);
    writeStderr(`wrote ${config.out}/${RENDERED_FILE} (${objects.length} objects)\n`);
  }
  return Promise.resolve(0);
}

/** `deno task deploy`. */
export async function runDeploy(
  config: ParsedConfig<typeof DEPLOY_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const objects = manifests(config);
  if (typeof objects === "number") return objects;
  const deployed = objects[0]?.metadata?.labels?.["app.kubernetes.io/version"] ?? DRIVER_VERSION;
  const started = Date.now();
  const k = client(config);
  try {
    const dry = config["dry-run"];
    const version = checkServerVersion(await k.client.serverVersion({ signal }), k.server);
    writeStderr(
      `${
        dry ? "Dry run: " : ""
      }deploying ${DRIVER_NAME} ${deployed} (${objects.length} objects) to ${k.server} (Kubernetes ${version}; ${k.source})\n`,
    );
    const report = await deploy({
      client: k.client,
      objects,
      dryRun: dry,
      wait: !config["no-wait"],
      waitTimeoutMs: config["wait-timeout"],
      crdTimeoutMs: config["crd-timeout"],
      progress: (line) => writeStderr(`  ${line}\n`),
      signal,
    });
    const counts = new Map<string, number>();
    for (const o of report.outcomes) counts.set(o.action, (counts.get(o.action) ?? 0) + 1);
    const lines = [
      `${dry ? "Dry run of" : "Deployed"} ${DRIVER_NAME} ${deployed} to ${k.server} in ${
        seconds(Date.now() - started)
      }: ${[...counts].map(([a, n]) => `${n} ${a}`).join(", ")}`,
      ...(dry ? report.outcomes.map((o) => `  ${o.action.padEnd(12)} ${o.object}`) : []),
      ...report.rollout.map((s) => `  ${s.done ? "ready  " : "waiting"} ${s.object}: ${s.text}`),
    ];
    writeStdout(`${lines.join("\n")}\n`);
    if (!report.rolledOut) {
      writeStderr(
        `Applied, but the rollout did not complete within ${seconds(config["wait-timeout"])}; ` +
          "check `kubectl -n <namespace> get pods`, or use --no-wait on clusters without nodes.\n",
      );
      return EXIT_ROLLOUT_INCOMPLETE;
    }
    return 0;
  } finally {
    await k.client.close();
  }
}

/** `deno task undeploy`. */
export async function runUndeploy(
  config: ParsedConfig<typeof UNDEPLOY_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const objects = manifests(config);
  if (typeof objects === "number") return objects;
  const started = Date.now();
  const k = client(config);
  try {
    const report = await undeploy({
      client: k.client,
      objects,
      purge: config.purge,
      force: config.force,
      dryRun: config["dry-run"],
      wait: !config["no-wait"],
      waitTimeoutMs: config["wait-timeout"],
      progress: (line) => writeStderr(`  ${line}\n`),
      signal,
    });
    const counts = new Map<string, number>();
    for (const o of report.outcomes) counts.set(o.action, (counts.get(o.action) ?? 0) + 1);
    const lines = [
      `Undeployed ${DRIVER_NAME} from ${k.server} in ${seconds(Date.now() - started)}: ${
        [...counts].map(([a, n]) => `${n} ${a}`).join(", ")
      }`,
      ...report.outcomes.filter((o) => o.action === "kept" || o.action === "would delete").map((
        o,
      ) =>
        `  ${o.action.padEnd(12)} ${o.object}${
          o.action === "kept" ? " (use --purge to delete)" : ""
        }`
      ),
      ...(report.remaining.length ? [`  still terminating: ${report.remaining.join(", ")}`] : []),
    ];
    writeStdout(`${lines.join("\n")}\n`);
    return 0;
  } catch (err) {
    if (err instanceof VolumesMountedError) {
      writeStderr(`error: undeploy refused: ${err.message}\n`);
      return EXIT_VOLUMES_MOUNTED;
    }
    throw err;
  } finally {
    await k.client.close();
  }
}
