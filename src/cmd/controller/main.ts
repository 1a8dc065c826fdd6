/**
 * `s3-csi-controller`: the controller Deployment. Thin entrypoint: all logic lives in `src/controller/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { CONTROLLER_OPTIONS } from "../../controller/controller_options.ts";
import { runController } from "../../controller/run_controller.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-controller",
      summary: "Controller of the S3 CSI driver: Mountpoint Pods, attachments and provisioning",
      options: CONTROLLER_OPTIONS,
      run: runController,
    }),
  );
}
