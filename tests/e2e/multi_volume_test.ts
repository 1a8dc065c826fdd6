/** Several volumes in one pod (`tests/scenarios/multi_volume.ts`) on the sandbox. */
import { MULTI_VOLUME } from "../scenarios/multi_volume.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(MULTI_VOLUME);
