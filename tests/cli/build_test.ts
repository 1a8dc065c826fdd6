/**
 * `deno task build` bundles every binary into dist/ (a CommonJS bundle and its loader), and each
 * runs on its own, also as the images run it (no config, no cache dir Deno can write).
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
    assert.ok((await Deno.stat(`${ROOT}dist/${name}.cjs`)).isFile);
    // Run from / with no config file so the bundle cannot lean on the repository, and as
    // images/deno_launcher.c runs it.
    const help = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        "--no-config",
        "--no-lock",
        "--no-remote",
        "--no-code-cache",
        bundle,
        "--help",
      ],
      cwd: "/",
      env: { ...env, DENO_DIR: "/nonexistent/deno" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(help.code, 0, new TextDecoder().decode(help.stderr));
    assert.match(new TextDecoder().decode(help.stdout), new RegExp(`^s3-csi-${name}: `));
  }
});
