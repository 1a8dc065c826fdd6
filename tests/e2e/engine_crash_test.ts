import { ENGINE_CRASH } from "../scenarios/engine_crash.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(ENGINE_CRASH);
