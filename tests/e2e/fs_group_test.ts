/** fsGroup ownership and group access (`tests/scenarios/fs_group.ts`) on the sandbox. */
import { FS_GROUP } from "../scenarios/fs_group.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(FS_GROUP);
