/** User-visible failures as pod events (`tests/scenarios/failures.ts`) on the sandbox. */
import { failuresScenario } from "../scenarios/failures.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(failuresScenario());
