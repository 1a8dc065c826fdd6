/** Per-volume secrets (`tests/scenarios/secrets.ts`) on the sandbox. */
import { SECRETS_PER_VOLUME } from "../scenarios/secrets.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(SECRETS_PER_VOLUME);
