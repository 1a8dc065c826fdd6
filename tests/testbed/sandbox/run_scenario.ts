/**
 * `deno task sandbox [--scenario NAME]`: one scenario of `tests/scenarios/` (the registry in
 * `tests/scenarios/registry.ts`, the same modules the e2e and real-node tiers run) on the sandbox's
 * cluster — emulated, on the real kube-apiserver or on the real node — each of its steps one
 * reported step. A scenario that throws outside a step is one failed step naming it.
 *
 * @module
 */
import { errorMessage } from "../../../src/util/errors.ts";
import { type Scenario, type ScenarioCluster, ScenarioSkipped } from "../../scenarios/cluster.ts";
import { E2E } from "../harness/e2e_cluster.ts";
import { RealNodeCluster } from "../services/real_node/cluster.ts";
import { lastProblem } from "./child_process.ts";
import type { SandboxEnv } from "./sandbox_env.ts";
import { SkippedError, type StepReporter } from "./step_reporter.ts";

/** Settings of the run that the scenarios read from their cluster. */
export interface ScenarioRunOptions {
  /** Longest wait of one step (`--timeout`). */
  readonly stepTimeoutMs: number;
  /** Leave long-running workloads in place (`--keep`). */
  readonly keepWorkloads: boolean;
}

/**
 * The started sandbox as the scenarios see it: the real node's cluster with `--real-node`, else
 * the sandbox itself (API emulator or real kube-apiserver, kubelet emulators).
 */
export function scenarioCluster(
  env: SandboxEnv,
  dir: string,
  o: ScenarioRunOptions,
): ScenarioCluster {
  let cluster: ScenarioCluster;
  const parts = env.realNode;
  if (parts) {
    if (!parts.node || !env.s3) throw new Error("the real node did not start");
    cluster = new RealNodeCluster(
      parts.node,
      env.s3.env,
      env.namespace,
      () => parts.worker ? [parts.worker] : [],
      parts.versions(),
    );
  } else {
    cluster = new E2E(env, dir);
  }
  cluster.stepTimeoutMs = o.stepTimeoutMs;
  cluster.keepWorkloads = o.keepWorkloads;
  cluster.uniqueName = (base) => env.unique(base);
  cluster.onCreated = (resource, name) => env.created.push({ resource, name });
  cluster.controllerProblem = async () => {
    if (parts) return undefined;
    if (!env.controller) return "no controller running: --without-controller";
    const why = await lastProblem(env.controller.logPath);
    return why ? `controller: ${why}` : undefined;
  };
  cluster.provisioningProblem = () =>
    env.provisions
      ? undefined
      : env.controller
      ? "the csi-provisioner emulation did not start"
      : "no controller running (--without-controller), so no CSI Controller service to provision with";
  return cluster;
}

/** Run `scenario` (registered as `id`) on `cluster`; every outcome goes through `r`. */
export async function runRegisteredScenario(
  cluster: ScenarioCluster,
  r: StepReporter,
  id: string,
  scenario: Scenario,
): Promise<void> {
  r.line(`Scenario ${id}: ${scenario.name}`);
  try {
    await scenario.run(cluster, (name, fn) =>
      r.step(name, async () => {
        try {
          return await fn();
        } catch (err) {
          throw err instanceof ScenarioSkipped ? new SkippedError(err.message) : err;
        }
      }, (d) => d ?? ""));
  } catch (err) {
    r.report(`Scenario ${id}`, "failed", errorMessage(err));
  }
}
