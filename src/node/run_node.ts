/**
 * The node plugin process: loads the Kubernetes configuration, starts the watches of this node's
 * S3PAs and Mountpoint Pods, cleans dead or orphaned source mounts, serves the CSI Identity and
 * Node services on the kubelet-facing socket, removes the node's `agent-not-ready` taint, serves
 * metrics, and on SIGTERM/SIGINT stops gracefully (mounts stay: they live in Mountpoint Pods).
 *
 * @module
 */
import { parseEndpoint } from "../csi/endpoint.ts";
import { IdentityService } from "../csi/identity_service.ts";
import { CsiServer } from "../csi/server.ts";
import { loadKubeConfig } from "../kube/kube_config.ts";
import { RestKubeClient } from "../kube/rest_client.ts";
import { AwsBucketProbe } from "../s3/bucket_probe.ts";
import { RealFiles } from "../sys/files.ts";
import { RealSys } from "../sys/sys.ts";
import type { ParsedConfig } from "../util/config.ts";
import { errorMessage } from "../util/errors.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { MountpointPods } from "./mountpoint_pods.ts";
import type { NODE_OPTIONS } from "../options/node_options.ts";
import { NodeService } from "./node_service.ts";
import { PromNodeMetrics, serveMetrics } from "./prom_metrics.ts";
import { Publisher } from "./publisher.ts";
import { removeAgentNotReadyTaint } from "./taint.ts";
import { Unmounter } from "./unmounter.ts";

/** Run the node plugin until `signal` aborts; resolves with the exit code. */
export async function runNode(
  config: ParsedConfig<typeof NODE_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const log = logger("node");
  const kube = loadKubeConfig();
  const nodeName = config["node-id"];
  const kubeletRoot = config["kubelet-path"];
  log.info("Starting node plugin {version} on node {nodeId}; Kubernetes API from {source}", {
    version: DRIVER_VERSION,
    nodeId: nodeName,
    source: kube.source,
  });
  const client = new RestKubeClient(kube.config);
  const sys = new RealSys();
  const files = new RealFiles();
  const locks = new KeyedMutex();
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  const pods = new MountpointPods(client, {
    nodeName,
    namespace: config["mountpoint-namespace"],
  });
  const watching = pods.run(stop.signal);
  const unmounter = new Unmounter({ sys, files, pods, locks, kubeletRoot });
  const metrics = new PromNodeMetrics({ sys, files, kubeletRoot });
  const probe = config["bucket-check"] ? new AwsBucketProbe() : undefined;
  probe?.warm().catch(() => {});
  const publisher = new Publisher({
    sys,
    files,
    pods,
    locks,
    probe,
    kubeletRoot,
    env: (n) => Deno.env.get(n),
    endpoint: config["s3-endpoint-url"],
    region: config["s3-region"],
    readAheadKb: config["read-ahead-kb"],
    timeouts: {
      attachmentMs: config["attachment-timeout"],
      podRunningMs: config["attachment-timeout"],
      readyMs: config["mount-timeout"],
    },
  });
  const server = new CsiServer({
    socketPath: parseEndpoint(config.endpoint),
    services: {
      identity: new IdentityService({ controllerService: false }),
      node: new NodeService({
        nodeId: nodeName,
        kubeletRoot,
        publisher,
        sys,
        files,
        pods,
        metrics,
      }),
    },
  });
  try {
    await pods.waitForSync(60_000, stop.signal);
    const cleaned = await unmounter.cleanAtStartup();
    if (cleaned.length) {
      log.info("Cleaned {count} source mounts at startup", { count: cleaned.length });
    }
    unmounter.attach(stop.signal);
    await server.start();
    if (config["metrics-port"] > 0) {
      serveMetrics(metrics.registry, config["metrics-port"], stop.signal);
    }
    removeAgentNotReadyTaint(client, nodeName, { signal: stop.signal }).catch((err) =>
      log.warn("Taint removal failed: {error}", { error: errorMessage(err) })
    );
    log.info("Node plugin ready");
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      else stop.signal.addEventListener("abort", () => resolve(), { once: true });
    });
  } finally {
    stop.abort();
    signal.removeEventListener("abort", onAbort);
    await server.stop(config["shutdown-grace"]).catch(() => {});
    await watching.catch(() => {});
  }
  return 0;
}
