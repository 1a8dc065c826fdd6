/** User-visible failures as pod events (`tests/scenarios/failures.ts`) on the sandbox. */
import { failuresScenario } from "../scenarios/failures.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(failuresScenario());
