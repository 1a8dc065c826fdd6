/**
 * `deno task sandbox --scenario NAME`: one scenario of `tests/scenarios/` (the registry in
 * `tests/scenarios/registry.ts`, the same modules the e2e and real-node tiers run) on the sandbox's
 * cluster, each of its steps one reported step. A scenario that throws outside a step is one failed
 * step naming it.
 *
 * @module
 */
import { errorMessage } from "../../../src/util/errors.ts";
import type { Scenario, ScenarioCluster } from "../../scenarios/cluster.ts";
import type { StepReporter } from "./step_reporter.ts";

/** Run `scenario` (registered as `id`) on `cluster`; every outcome goes through `r`. */
export async function runRegisteredScenario(
  cluster: ScenarioCluster,
  r: StepReporter,
  id: string,
  scenario: Scenario,
): Promise<void> {
  r.line(`Scenario ${id}: ${scenario.name}`);
  try {
    await scenario.run(cluster, async (name, fn) => {
      await r.step(name, async () => await fn(), (d) => d ?? "");
    });
  } catch (err) {
    r.report(`Scenario ${id}`, "failed", errorMessage(err));
  }
}
