/**
 * `s3-csi-node`: the CSI node plugin (DaemonSet). Thin entrypoint: all logic lives in `src/node/`.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { NODE_OPTIONS } from "../../options/node_options.ts";
import { runNode } from "../../node/run_node.ts";

if (import.meta.main) {
  Deno.exit(
    await runCli({
      binary: "s3-csi-node",
      summary: "CSI node plugin of the S3 CSI driver: mounts S3 buckets into pods",
      options: NODE_OPTIONS,
      run: runNode,
    }),
  );
}
