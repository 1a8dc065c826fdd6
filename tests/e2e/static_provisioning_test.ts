/** Static provisioning (`tests/scenarios/static_provisioning.ts`) on the sandbox. */
import { STATIC_PROVISIONING } from "../scenarios/static_provisioning.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(STATIC_PROVISIONING);
