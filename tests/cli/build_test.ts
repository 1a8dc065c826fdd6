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

Deno.test("both image builds give the node plugin and the controller the same GLIBC_TUNABLES", async () => {
  const { GLIBC_TUNABLES } = await import("../../scripts/build.ts");
  const { runtimeConfig } = await import("../../scripts/build_images_local.ts");
  const dockerfile = await Deno.readTextFile(`${ROOT}images/driver.Dockerfile`);
  assert.ok(
    dockerfile.split("\n").includes(`ENV GLIBC_TUNABLES=${GLIBC_TUNABLES}`),
    "images/driver.Dockerfile sets GLIBC_TUNABLES as scripts/build.ts says",
  );
  for (const c of ["node", "controller"] as const) {
    assert.ok(runtimeConfig(c, "dev", "").env.includes(`GLIBC_TUNABLES=${GLIBC_TUNABLES}`), c);
  }
  // The mounter becomes the supervisor and the engine, which keep glibc's defaults.
  assert.ok(!runtimeConfig("mounter", "dev", "").env.some((e) => e.startsWith("GLIBC_TUNABLES=")));
  const mounterDockerfile = await Deno.readTextFile(`${ROOT}images/mounter.Dockerfile`);
  assert.ok(!mounterDockerfile.includes("GLIBC_TUNABLES"));
});
