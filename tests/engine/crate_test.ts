/**
 * The engine crate's own Rust unit tests (`#[cfg(test)]` in src/engine/src: the command line, the
 * settings, the FUSE fd check, the exit codes, …), run by `scripts/build_engine.sh --test` with
 * the toolchain and target dir of the engine build, so only the crate itself compiles again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ROOT } from "../_helpers.ts";
import { cargoReason, engineTest } from "../testbed/harness/engine.ts";

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

/**
 * The vendored `mountpoint-s3-fuser` (src/engine/vendor/, wired by `[patch.crates-io]`) is the
 * published crate plus exactly `src/engine/patches/mountpoint-s3-fuser-0.1.1.patch` (ADR 0012):
 * every vendored file is the published one, except the files the patch names, whose diff against
 * the published one is the patch. The published crate is fetched by cargo into a scratch project.
 */
engineTest(
  "engine crate: the vendored FUSE crate is the published one plus our patch only",
  cargoReason(),
  async () => {
    const crate = "mountpoint-s3-fuser";
    const version = "0.1.1";
    const vendored = `${ROOT}src/engine/vendor/${crate}`;
    const patch = await Deno.readTextFile(`${ROOT}src/engine/patches/${crate}-${version}.patch`);
    const scratch = await Deno.makeTempDir({ prefix: "s3csi-vendor-check-" });
    try {
      await Deno.mkdir(`${scratch}/src`);
      await Deno.writeTextFile(`${scratch}/src/lib.rs`, "");
      await Deno.writeTextFile(
        `${scratch}/Cargo.toml`,
        `[package]\nname = "vendor-check"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n${crate} = "=${version}"\n`,
      );
      const fetch = await new Deno.Command("cargo", {
        args: ["metadata", "--format-version=1", "--manifest-path", `${scratch}/Cargo.toml`],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(fetch.code, 0, new TextDecoder().decode(fetch.stderr).slice(-2000));
      const meta = JSON.parse(new TextDecoder().decode(fetch.stdout)) as {
        packages: { name: string; version: string; manifest_path: string }[];
      };
      const pkg = meta.packages.find((p) => p.name === crate && p.version === version);
      assert.ok(pkg, `cargo did not resolve ${crate} ${version}`);
      const published = pkg.manifest_path.replace(/\/Cargo\.toml$/, "");
      const patched = [...patch.matchAll(/^\+\+\+ b\/(\S+)/gm)].map((m) => m[1]!);
      assert.deepEqual(patched, ["src/session.rs"], "the patch touches one file");
      const files: string[] = [];
      const walk = async (dir: string, rel: string) => {
        for await (const e of Deno.readDir(dir)) {
          const r = rel ? `${rel}/${e.name}` : e.name;
          if (e.isDirectory) await walk(`${dir}/${e.name}`, r);
          else files.push(r);
        }
      };
      await walk(vendored, "");
      assert.ok(files.includes("src/session.rs") && files.includes("Cargo.toml"));
      for (const f of files) {
        const ours = await Deno.readFile(`${vendored}/${f}`);
        if (patched.includes(f)) {
          const diff = await new Deno.Command("diff", {
            args: ["-u", `${published}/${f}`, `${vendored}/${f}`],
            stdout: "piped",
          }).output();
          const hunks = (t: string) => t.split("\n").filter((l) => !/^(---|\+\+\+) /.test(l));
          assert.deepEqual(
            hunks(new TextDecoder().decode(diff.stdout)),
            hunks(patch),
            `${f} differs from the published file by more (or less) than the patch`,
          );
        } else {
          assert.deepEqual(ours, await Deno.readFile(`${published}/${f}`), `${f} was changed`);
        }
      }
    } finally {
      await Deno.remove(scratch, { recursive: true }).catch(() => {});
    }
  },
);
