/** Read-only volumes (`tests/scenarios/read_only.ts`) on the sandbox. */
import { READ_ONLY } from "../scenarios/read_only.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(READ_ONLY);
