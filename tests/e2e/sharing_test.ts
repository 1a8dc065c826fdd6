/** Mountpoint Pod sharing and separation (`tests/scenarios/sharing.ts`) on the sandbox. */
import { SHARING } from "../scenarios/sharing.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(SHARING);
