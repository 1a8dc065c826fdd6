/** Inline (ephemeral) volumes (`tests/scenarios/inline_volumes.ts`) on the sandbox. */
import { INLINE_VOLUMES } from "../scenarios/inline_volumes.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(INLINE_VOLUMES);
