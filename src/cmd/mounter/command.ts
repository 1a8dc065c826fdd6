/**
 * `s3-csi-mounter` as a function: what `main.ts` runs, and the export of the binary's CommonJS bundle
 * (`deno task build`, scripts/build.ts), which has no top-level await.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { MOUNTER_OPTIONS } from "../../options/mounter_options.ts";
import { runMounter } from "../../mounter/run_mounter.ts";

/** Run the binary with `Deno.args`; resolves with the exit code. */
export function main(): Promise<number> {
  return runCli({
    binary: "s3-csi-mounter",
    summary:
      "Mountpoint Pod entrypoint of the S3 CSI driver: runs the FUSE engine on a received fd",
    options: MOUNTER_OPTIONS,
    run: runMounter,
  });
}
