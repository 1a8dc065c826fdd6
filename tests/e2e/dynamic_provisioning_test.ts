/** Dynamic provisioning, modes bucket and prefix (`tests/scenarios/dynamic_provisioning.ts`). */
import { DYNAMIC_PROVISIONING } from "../scenarios/dynamic_provisioning.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(DYNAMIC_PROVISIONING);
