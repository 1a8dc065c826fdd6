/**
 * The node plugin process: loads the Kubernetes configuration, serves the CSI Identity and Node
 * services on the kubelet-facing socket **at once**, then — in the background, for as long as the
 * API server does not answer — fills the caches of this node's S3PAs and Mountpoint Pods; once
 * they are filled it cleans dead or orphaned source mounts, starts the unmounter and removes the
 * node's `agent-not-ready` taint. Serves metrics, and on SIGTERM/SIGINT stops gracefully (mounts
 * stay: they live in Mountpoint Pods).
 *
 * Serving before the caches are filled keeps the kubelet's unpublish, volume stats and the
 * republish of mounted targets working while the API server is down; a publish that needs the API
 * waits for it within its deadline, then fails UNAVAILABLE with a message saying so. The process
 * never exits because the API is unreachable.
 *
 * @module
 */
import { parseEndpoint } from "../csi/endpoint.ts";
import { IdentityService } from "../csi/identity_service.ts";
import { CsiServer } from "../csi/server.ts";
import { loadKubeConfig } from "../kube/kube_config.ts";
import { RestKubeClient } from "../kube/rest_client.ts";
import { AwsBucketProbe } from "../s3/bucket_probe.ts";
import { readCaBundle } from "../s3/ca_bundle.ts";
import { parseS3Endpoint } from "../s3/endpoint_url.ts";
import { HttpStsClient } from "../s3/sts.ts";
import { PodIdentity } from "./pod_identity.ts";
import { RealFiles } from "../sys/files.ts";
import { RealSys } from "../sys/sys.ts";
import type { Engine } from "../mppod/mount_message.ts";
import { mountpointPodInvariants } from "../mppod/pod_spec.ts";
import type { ParsedConfig } from "../util/config.ts";
import { errorMessage } from "../util/errors.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { Custody } from "./custody.ts";
import { HealthChecker } from "./health.ts";
import { MountpointPods } from "./mountpoint_pods.ts";
import type { NODE_OPTIONS } from "../options/node_options.ts";
import { NodeService } from "./node_service.ts";
import { NO_METRICS, type NodeMetrics } from "./metrics.ts";
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
  const health = new HealthChecker(files, { timeoutMs: 3000 });
  const custody = new Custody({ sys, files, kubeletRoot, locks, pods });
  const unmounter = new Unmounter({ sys, files, pods, locks, health, custody, kubeletRoot });
  // prom-client is loaded only when metrics are served (it costs memory; the port is 0 by default).
  const prom = config["metrics-port"] > 0
    ? new (await import("./prom_metrics.ts")).PromNodeMetrics({ sys, health, kubeletRoot })
    : undefined;
  const metrics: NodeMetrics = prom ?? NO_METRICS;
  const caBundlePem = await readCaBundle(config["s3-ca-bundle"]);
  const probe = config["bucket-check"] ? new AwsBucketProbe({ caBundlePem }) : undefined;
  probe?.warm().catch(() => {});
  const podIdentity = new PodIdentity({
    sts: new HttpStsClient({ caBundlePem }),
    audience: config["pod-identity-audience"],
    stsEndpoint: config["sts-endpoint-url"]
      ? parseS3Endpoint(config["sts-endpoint-url"])
      : undefined,
    sessionSeconds: Math.round(config["pod-identity-session"] / 1000),
    renewBeforeMs: config["pod-identity-renew-before"],
    timeoutMs: 10_000,
  });
  const publisher = new Publisher({
    sys,
    files,
    pods,
    locks,
    health,
    custody,
    probe,
    kubeletRoot,
    env: (n) => Deno.env.get(n),
    endpoint: config["s3-endpoint-url"],
    region: config["s3-region"],
    readAheadKb: config["read-ahead-kb"],
    mountpointPod: mountpointPodInvariants({
      image: config["mountpoint-image"],
      command: config["mountpoint-command"],
      uid: config["mountpoint-uid"],
    }),
    podIdentity,
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
        defaultEngine: config["default-engine"] as Engine, // checked by the flag's choices
        cacheSizeLimit: config["mountpoint-cache-size-limit"],
        publisher,
        sys,
        files,
        pods,
        health,
        metrics,
      }),
    },
  });
  let background: Promise<void> | undefined;
  // The sessions this process held before a restart: needs no API, only the supervisors.
  await custody.recover(stop.signal).catch((err) =>
    log.warn("Taking back the custody of FUSE connections failed: {error}", {
      error: errorMessage(err),
    })
  );
  const keeping = custody.run(stop.signal);
  try {
    await server.start();
    if (prom) {
      const { serveMetrics } = await import("./prom_metrics.ts");
      serveMetrics(prom.registry, config["metrics-port"], stop.signal);
    }
    background = (async () => {
      await waitForApi(pods, stop.signal);
      const cleaned = await unmounter.cleanAtStartup();
      if (cleaned.length) {
        log.info("Cleaned {count} source mounts at startup", { count: cleaned.length });
      }
      unmounter.attach(stop.signal);
      removeAgentNotReadyTaint(client, nodeName, { signal: stop.signal }).catch((err) =>
        log.warn("Taint removal failed: {error}", { error: errorMessage(err) })
      );
      log.info("Node plugin ready");
    })().catch((err) => {
      if (!stop.signal.aborted) {
        log.error("Start-up work failed: {error}", { error: errorMessage(err) });
      }
    });
    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      else stop.signal.addEventListener("abort", () => resolve(), { once: true });
    });
  } finally {
    stop.abort();
    signal.removeEventListener("abort", onAbort);
    await server.stop(config["shutdown-grace"]).catch(() => {});
    await background;
    await keeping.catch(() => {});
    custody.closeAll();
    await watching.catch(() => {});
  }
  return 0;
}

/** Wait, as long as it takes, for the caches of S3PAs and Mountpoint Pods to fill. */
async function waitForApi(pods: MountpointPods, signal: AbortSignal): Promise<void> {
  const log = logger("node");
  const started = performance.now();
  while (!pods.synced) {
    try {
      await pods.waitForSync(60_000, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      log.warn(
        "Still waiting for the Kubernetes API after {seconds} s: serving unpublish, volume stats and mounted volumes meanwhile",
        { seconds: Math.round((performance.now() - started) / 1000) },
      );
    }
  }
}
