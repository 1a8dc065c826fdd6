/**
 * `s3-csi-node` as a function: what `main.ts` runs, and the export of the binary's CommonJS bundle
 * (`deno task build`, scripts/build.ts), which has no top-level await.
 *
 * @module
 */
import { runCli } from "../../util/cli.ts";
import { NODE_OPTIONS } from "../../options/node_options.ts";
import { runNode } from "../../node/run_node.ts";

/** Run the binary with `Deno.args`; resolves with the exit code. */
export function main(): Promise<number> {
  return runCli({
    binary: "s3-csi-node",
    summary: "CSI node plugin of the S3 CSI driver: mounts S3 buckets into pods",
    options: NODE_OPTIONS,
    run: runNode,
  });
}
