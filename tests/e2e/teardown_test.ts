/**
 * Full teardown without leaks (`tests/scenarios/teardown.ts`) on a two-node sandbox; after the
 * scenario the sandbox's own leak check also finds no mount or process under its state dir.
 */
import { TEARDOWN } from "../scenarios/teardown.ts";
import { e2eScenario } from "../testbed/harness/e2e_cluster.ts";

e2eScenario(TEARDOWN, 2);
