/**
 * `s3-csi-controller` as a function: what `main.ts` runs, and the export of the binary's CommonJS bundle
 * (`deno task build`, scripts/build.ts), which has no top-level await.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { CONTROLLER_OPTIONS } from "../../options/controller_options.ts";
import { runController } from "../../controller/run_controller.ts";
import { createProvisioning } from "../../provisioning/create_provisioning.ts";

/** Run the binary with `Deno.args`; resolves with the exit code. */
export function main(): Promise<number> {
  return runCli({
    binary: "s3-csi-controller",
    summary: "Controller of the S3 CSI driver: Mountpoint Pods, attachments and provisioning",
    options: CONTROLLER_OPTIONS,
    run: (config, signal) => runController(config, signal, { createProvisioning }),
  });
}
