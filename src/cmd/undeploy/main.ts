/**
 * `s3-csi-undeploy` (`deno task undeploy`). Thin entrypoint: all logic lives in `src/deploy/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { UNDEPLOY_OPTIONS } from "../../deploy/cli_options.ts";
import { runUndeploy } from "../../deploy/cli.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-undeploy",
      summary: "Delete the driver from the cluster (keeps the CRD and attachments unless --purge)",
      options: UNDEPLOY_OPTIONS,
      run: runUndeploy,
    }),
  );
}
