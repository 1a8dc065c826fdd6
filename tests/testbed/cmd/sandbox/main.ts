/**
 * `s3-csi-sandbox` (`deno task sandbox`): the one-machine sandbox. Thin entrypoint: all logic lives
 * in `tests/testbed/sandbox/`.
 *
 * @module
 */
import { runCli } from "../../../../src/util/cli.ts";
import { runSandbox } from "../../sandbox/sandbox.ts";
import { SANDBOX_OPTIONS } from "../../sandbox/sandbox_options.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-sandbox",
      summary:
        "One-machine sandbox: emulated API server and kubelets, real processes, FUSE, gRPC and S3",
      options: SANDBOX_OPTIONS,
      run: runSandbox,
    }),
  );
}
