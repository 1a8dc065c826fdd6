/**
 * `deno task build` bundles every entrypoint into dist/, and each bundle runs on its own.
 */
import assert from "node:assert/strict";
import { ROOT, runToEnd } from "../_helpers.ts";

Deno.test("deno task build makes three bundles that each run --help and --version", async () => {
  const env = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
  };
  const build = await runToEnd(Deno.execPath(), ["run", "-A", `${ROOT}scripts/build.ts`], env);
  assert.equal(build.code, 0, build.stderr);
  for (const name of ["node", "controller", "mounter"]) {
    const bundle = `${ROOT}dist/${name}.js`;
    // Run from / with no config file so the bundle cannot lean on the repository.
    const help = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-config", bundle, "--help"],
      cwd: "/",
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(help.code, 0, new TextDecoder().decode(help.stderr));
    assert.match(new TextDecoder().decode(help.stdout), new RegExp(`^s3-csi-${name}: `));
  }
});
