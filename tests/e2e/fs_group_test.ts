/** fsGroup ownership and group access (`tests/scenarios/fs_group.ts`) on the sandbox. */
import { FS_GROUP } from "../scenarios/fs_group.ts";
import { e2eScenario } from "./_e2e.ts";

e2eScenario(FS_GROUP);
