/**
 * The engine crate's own Rust unit tests (`#[cfg(test)]` in src/engine/src: the command line, the
 * settings, the FUSE fd check, the exit codes, …), run by `scripts/build_engine.sh --test` with
 * the toolchain and target dir of the engine build, so only the crate itself compiles again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ROOT } from "../_helpers.ts";
import { cargoReason, engineTest } from "./_engine.ts";

engineTest("engine crate: cargo test passes (Rust unit tests)", cargoReason(), async () => {
  const out = await new Deno.Command("bash", {
    args: [`${ROOT}scripts/build_engine.sh`, "--test"],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `build_engine.sh --test exit ${out.code}:\n${text.slice(-4000)}`);
  const results = [...text.matchAll(/test result: ok\. (\d+) passed; (\d+) failed/g)];
  assert.ok(results.length > 0, `no test result line:\n${text.slice(-2000)}`);
  const passed = results.reduce((n, m) => n + Number(m[1]), 0);
  assert.ok(passed >= 30, `only ${passed} Rust tests ran`);
  assert.ok(results.every((m) => m[2] === "0"));
  // deno-lint-ignore no-console
  console.error(`engine crate: ${passed} Rust tests passed`);
});
