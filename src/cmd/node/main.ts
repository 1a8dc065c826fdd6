/**
 * `s3-csi-node`: the CSI node plugin (DaemonSet). Thin entrypoint: all logic lives in `src/node/`.
 *
 * @module
 */
import { main } from "./command.ts";

if (import.meta.main) Deno.exit(await main());
