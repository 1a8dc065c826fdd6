/**
 * `s3-csi-render` (`deno task render`). Thin entrypoint: all logic lives in `src/deploy/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { RENDER_OPTIONS } from "../../deploy/cli_options.ts";
import { runRender } from "../../deploy/cli.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-render",
      summary: "Render the driver's Kubernetes manifests from values",
      options: RENDER_OPTIONS,
      run: runRender,
    }),
  );
}
