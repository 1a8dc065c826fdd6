/**
 * The node plugin process: loads the Kubernetes configuration, serves the CSI Identity and Node
 * services on the kubelet-facing socket until SIGTERM/SIGINT, then stops gracefully.
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
import type { NODE_OPTIONS } from "./node_options.ts";
import { NodeService } from "./node_service.ts";

/** Run the node plugin until `signal` aborts; resolves with the exit code. */
export async function runNode(
  config: ParsedConfig<typeof NODE_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const log = logger("node");
  const kube = loadKubeConfig();
  log.info("Starting node plugin {version} on node {nodeId}; Kubernetes API from {source}", {
    version: DRIVER_VERSION,
    nodeId: config["node-id"],
    source: kube.source,
  });
  const server = new CsiServer({
    socketPath: parseEndpoint(config.endpoint),
    services: {
      identity: new IdentityService({ controllerService: false }),
      node: new NodeService({ nodeId: config["node-id"] }),
    },
  });
  await server.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await server.stop(config["shutdown-grace"]);
  return 0;
}
