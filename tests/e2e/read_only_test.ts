/** Read-only volumes (`tests/scenarios/read_only.ts`) on the sandbox. */
import { READ_ONLY } from "../scenarios/read_only.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(READ_ONLY);
