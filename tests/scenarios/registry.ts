/**
 * Every end-to-end scenario by the name `deno task sandbox --scenario NAME` takes, in the order
 * `--help` lists them. One registry for every runner: the e2e tier (`tests/e2e/`), the real-node
 * tier (`tests/real_node/`) and the sandbox command (emulated, `--real-apiserver` or
 * `--real-node`) run the same modules; without `--scenario` the sandbox runs
 * {@link DEFAULT_SCENARIO}. A new scenario is a
 * module of this folder plus one line here (and, for a tier, one registration there).
 *
 * @module
 */
import type { Scenario } from "./cluster.ts";
import { WALK_THROUGH } from "./walk_through.ts";
import { STATIC_PROVISIONING } from "./static_provisioning.ts";
import { DYNAMIC_PROVISIONING } from "./dynamic_provisioning.ts";
import { SHARING } from "./sharing.ts";
import { FS_GROUP } from "./fs_group.ts";
import { READ_ONLY } from "./read_only.ts";
import { MULTI_VOLUME } from "./multi_volume.ts";
import { SECRETS_PER_VOLUME } from "./secrets.ts";
import { failuresScenario } from "./failures.ts";
import { TEARDOWN } from "./teardown.ts";
import { DRAIN } from "./drain.ts";
import { NO_EXECUTE_TAINT } from "./taints.ts";
import { HEADROOM } from "./headroom.ts";
import { ENGINE_CRASH } from "./engine_crash.ts";
import { UPGRADE } from "./upgrade.ts";

/** Scenario names (as `--scenario` takes them) → scenario. */
export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  // What `deno task sandbox` runs without --scenario.
  "walk-through": WALK_THROUGH,
  "static-provisioning": STATIC_PROVISIONING,
  "dynamic-provisioning": DYNAMIC_PROVISIONING,
  sharing: SHARING,
  "fs-group": FS_GROUP,
  "read-only": READ_ONLY,
  "multi-volume": MULTI_VOLUME,
  secrets: SECRETS_PER_VOLUME,
  failures: failuresScenario(),
  teardown: TEARDOWN,
  // Mounts outlive their engine (issue 21).
  "engine-crash": ENGINE_CRASH,
  // Day 2 (issue 22): real-node only.
  drain: DRAIN,
  taints: NO_EXECUTE_TAINT,
  headroom: HEADROOM,
  upgrade: UPGRADE,
};

/** What `deno task sandbox` runs without `--scenario`. */
export const DEFAULT_SCENARIO = "walk-through";

/** The scenario named `name`, or undefined. */
export function scenarioNamed(name: string): Scenario | undefined {
  return Object.hasOwn(SCENARIOS, name) ? SCENARIOS[name] : undefined;
}

/** `name: what it shows` lines for `--help`. */
export function scenarioHelp(): string {
  return Object.entries(SCENARIOS).map(([id, s]) =>
    `${id} (${s.name}${s.nodes > 1 ? `; ${s.nodes} nodes` : ""}${
      s.realNodeOnly ? "; --real-node" : ""
    })`
  ).join(", ");
}
