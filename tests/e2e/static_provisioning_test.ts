/** Static provisioning (`tests/scenarios/static_provisioning.ts`) on the sandbox. */
import { STATIC_PROVISIONING } from "../scenarios/static_provisioning.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(STATIC_PROVISIONING);
