/** Per-volume secrets (`tests/scenarios/secrets.ts`) on the sandbox. */
import { SECRETS_PER_VOLUME } from "../scenarios/secrets.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(SECRETS_PER_VOLUME);
