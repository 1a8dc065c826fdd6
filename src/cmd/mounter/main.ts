/**
 * `s3-csi-mounter`: entrypoint of Mountpoint Pods. Thin entrypoint: all logic lives in `src/mounter/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { MOUNTER_OPTIONS } from "../../options/mounter_options.ts";
import { runMounter } from "../../mounter/run_mounter.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-mounter",
      summary:
        "Mountpoint Pod entrypoint of the S3 CSI driver: runs the FUSE engine on a received fd",
      options: MOUNTER_OPTIONS,
      run: runMounter,
    }),
  );
}
