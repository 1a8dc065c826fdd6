/**
 * `s3-csi-controller`: the controller Deployment. Thin entrypoint: the reconciler lives in `src/controller/`,
 * the CSI Controller service (dynamic provisioning) in `src/provisioning/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { CONTROLLER_OPTIONS } from "../../options/controller_options.ts";
import { runController } from "../../controller/run_controller.ts";
import { createProvisioning } from "../../provisioning/create_provisioning.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-controller",
      summary: "Controller of the S3 CSI driver: Mountpoint Pods, attachments and provisioning",
      options: CONTROLLER_OPTIONS,
      run: (config, signal) => runController(config, signal, { createProvisioning }),
    }),
  );
}
