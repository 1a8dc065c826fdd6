import { ENGINE_CRASH } from "../scenarios/engine_crash.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(ENGINE_CRASH);
