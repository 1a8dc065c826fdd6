/**
 * `s3-csi-controller`: the controller Deployment. Thin entrypoint: the reconciler lives in `src/controller/`,
 * the CSI Controller service (dynamic provisioning) in `src/provisioning/`.
 *
 * @module
 */
import { main } from "./command.ts";

if (import.meta.main) Deno.exit(await main());
