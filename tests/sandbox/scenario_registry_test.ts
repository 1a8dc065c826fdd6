/**
 * The scenario registry `deno task sandbox --scenario` selects from (`tests/scenarios/registry.ts`)
 * and the command line around it: `--help` lists every scenario, a real-node-only scenario needs
 * `--real-node`. (The scenarios themselves run in the e2e and real-node tiers and through the
 * sandbox: `tests/sandbox/sandbox_test.ts` runs the default one, the walk-through.)
 */
import assert from "node:assert/strict";
import { scenarioHelp, scenarioNamed, SCENARIOS } from "../scenarios/registry.ts";
import { lastClosed, writerScript } from "../scenarios/writer.ts";
import { ROOT, runToEnd } from "../_helpers.ts";

async function sandbox(args: string[]) {
  return await runToEnd("deno", ["task", "--cwd", ROOT, "sandbox", ...args], {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
  });
}

Deno.test("registry: names are CLI words, each scenario once; --help lists them with their needs", () => {
  for (const id of Object.keys(SCENARIOS)) assert.match(id, /^[a-z][a-z0-9-]*$/);
  const scenarios = Object.values(SCENARIOS);
  assert.equal(new Set(scenarios).size, scenarios.length, "a scenario registered twice");
  assert.equal(scenarioNamed("drain"), SCENARIOS.drain);
  assert.equal(scenarioNamed("toString"), undefined, "own names only");
  assert.equal(SCENARIOS.drain!.nodes, 2);
  for (const id of ["drain", "taints", "headroom"]) assert.ok(SCENARIOS[id]!.realNodeOnly, id);
  assert.match(scenarioHelp(), /drain \([^)]*; 2 nodes; --real-node\)/);
});

Deno.test("writer: the highest CLOSED line; the script stops cleanly on SIGTERM", () => {
  assert.equal(lastClosed(""), -1);
  assert.equal(lastClosed("READY\nCLOSED 0\nCLOSED 1\nCLOSED 12\nSTOPPED 13\n"), 12);
  assert.equal(lastClosed("CLOSED 3x\n"), -1);
  const script = writerScript("/v");
  assert.match(script, /trap 'stop=1' TERM/);
  assert.match(script, /\/v\/\$POD_NAME\/\$n\.txt/);
});

Deno.test("deno task sandbox --help lists every scenario; a real-node-only --scenario without --real-node is refused", async () => {
  const help = await sandbox(["--help"]);
  assert.equal(help.code, 0, help.stderr);
  const flat = help.stdout.replace(/\s+/g, " ");
  for (const id of Object.keys(SCENARIOS)) {
    assert.ok(flat.includes(`${id} (`), `--help names ${id}`);
  }
  const bad = await sandbox(["--scenario", "drain"]);
  assert.equal(bad.code, 2, bad.stdout);
  assert.match(bad.stdout, /--scenario drain runs on the real node: add --real-node/);
  const unknown = await sandbox(["--real-node", "--scenario", "nope"]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr + unknown.stdout, /--scenario must be one of .*drain/);
});
