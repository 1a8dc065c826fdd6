/** Inline (ephemeral) volumes (`tests/scenarios/inline_volumes.ts`) on the sandbox. */
import { INLINE_VOLUMES } from "../scenarios/inline_volumes.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(INLINE_VOLUMES);
