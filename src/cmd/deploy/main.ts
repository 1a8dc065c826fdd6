/**
 * `s3-csi-deploy` (`deno task deploy`). Thin entrypoint: all logic lives in `src/deploy/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { DEPLOY_OPTIONS } from "../../deploy/cli_options.ts";
import { runDeploy } from "../../deploy/cli.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-deploy",
      summary:
        "Server-side apply the driver to the current kubeconfig context and wait for rollout",
      options: DEPLOY_OPTIONS,
      run: runDeploy,
    }),
  );
}
