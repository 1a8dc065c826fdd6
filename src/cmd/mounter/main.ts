/**
 * `s3-csi-mounter`: entrypoint of Mountpoint Pods. Thin entrypoint: all logic lives in `src/mounter/`.
 *
 * @module
 */
import { main } from "./command.ts";

if (import.meta.main) Deno.exit(await main());
