/**
 * The controller process. Today it loads the Kubernetes configuration and, when `--csi-endpoint` is
 * set, serves the CSI Identity service there; the pod reconciler (issue #5) and the CSI Controller
 * service (issue #7) plug in here as they land.
 *
 * @module
 */
import { parseEndpoint } from "../csi/endpoint.ts";
import { IdentityService } from "../csi/identity_service.ts";
import { CsiServer } from "../csi/server.ts";
import { loadKubeConfig } from "../kube/kube_config.ts";
import type { ParsedConfig } from "../util/config.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import type { CONTROLLER_OPTIONS } from "./controller_options.ts";

/** Run the controller until `signal` aborts; resolves with the exit code. */
export async function runController(
  config: ParsedConfig<typeof CONTROLLER_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const log = logger("controller");
  const kube = loadKubeConfig();
  log.info("Starting controller {version}; Kubernetes API from {source}", {
    version: DRIVER_VERSION,
    source: kube.source,
  });
  const endpoint = config["csi-endpoint"];
  const server = endpoint
    ? new CsiServer({
      socketPath: parseEndpoint(endpoint),
      services: { identity: new IdentityService({ controllerService: false }) },
    })
    : undefined;
  await server?.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await server?.stop(config["shutdown-grace"]);
  return 0;
}
