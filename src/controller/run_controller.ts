/**
 * The controller process:
 * 1. serve /metrics, /healthz, /readyz;
 * 2. when `--csi-endpoint` is set, serve CSI Identity and Controller (dynamic provisioning) there;
 *    with `--reconciler=false` that is all it does: no Kubernetes API access at all (the
 *    csi-provisioner Deployment runs it so, beside the sidecar that holds the API credentials);
 * 3. load the Kubernetes configuration and contend for the leader Lease (unless
 *    `--leader-elect=false`); while leading, run informers for Pods, PVCs, PVs and S3PAs, the
 *    reconcile queue and the stale cleaner. The workers' API client is fenced by the lease: no
 *    write leaves once the lease is no longer valid by this process's own clock;
 * 4. on SIGTERM/SIGINT stop everything within `--shutdown-grace`; if leadership is lost, exit 1 so
 *    a fresh process contends again (as client-go controllers do).
 *
 * @module
 */
import type { MountpointS3PodAttachment } from "../api/mountpoint_s3_pod_attachment.ts";
import { parseEndpoint } from "../csi/endpoint.ts";
import { IdentityService } from "../csi/identity_service.ts";
import { CsiServer, type CsiServices } from "../csi/server.ts";
import { type KubeClient, type KubeObject, objectKey } from "../kube/client.ts";
import { ApiEventRecorder } from "../kube/event_recorder.ts";
import { Informer } from "../kube/informer.ts";
import { loadKubeConfig } from "../kube/kube_config.ts";
import { leaderElectionProblem, LeaderElector } from "../kube/leader_election.ts";
import { NODES, PODS, PVCS, PVS, SERVICE_ACCOUNTS } from "../kube/resources.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import { RestKubeClient } from "../kube/rest_client.ts";
import { withSignal } from "../kube/signal_client.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  ServiceAccount,
} from "../kube/types.ts";
import type { MountpointPodConfig } from "../mppod/pod_spec.ts";
import { ANNOTATION_ROLE_ARN, COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../mppod/labels.ts";
import { ConfigError, errorMessage } from "../util/errors.ts";
import { startHealthServer } from "../util/health_server.ts";
import { logger } from "../util/log.ts";
import { aborted } from "../util/sleep.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { type ControllerConfig, LEADER_LEASE_NAME } from "../options/controller_options.ts";
import { slimNode, slimPod, slimServiceAccount, withoutManagedFields } from "./cache_transforms.ts";
import { PromControllerMetrics } from "./prom_metrics.ts";
import { type ControllerCaches, INDEX, Reconciler, registerIndexes } from "./reconciler.ts";
import { StaleCleaner } from "./stale_cleaner.ts";
import type { HeadroomConfig } from "./headroom_pods.ts";
import { WorkQueue } from "../util/work_queue.ts";

/** The CSI Controller service (dynamic provisioning) the controller serves on `--csi-endpoint`. */
export interface ProvisioningService {
  /** The CSI Controller service handlers. */
  readonly service: NonNullable<CsiServices["controller"]>;
  /** Whether driver credentials are configured (for the start-up log). */
  readonly driverCredentials: boolean;
  /** Release its connections. */
  close(): void;
}

/** What the controller process is built from (wired by its entrypoint). */
export interface ControllerDeps {
  /** Build the CSI Controller service; called only when `--csi-endpoint` is set. */
  readonly createProvisioning: (config: ControllerConfig) => Promise<ProvisioningService>;
}

/** Exit code when leadership was lost. */
export const EXIT_LOST_LEADERSHIP = 1;

/** Mountpoint Pod settings from the controller's configuration. */
export function mountpointPodConfig(config: ControllerConfig): MountpointPodConfig {
  return {
    namespace: config["mountpoint-namespace"],
    image: config["mountpoint-image"],
    imagePullPolicy: config["mountpoint-image-pull-policy"],
    command: config["mountpoint-command"],
    driverVersion: DRIVER_VERSION,
    mountpointVersion: config["mountpoint-version"],
    priorityClassName: config["mountpoint-priority-class-name"],
    uid: config["mountpoint-uid"],
    terminationGraceSeconds: config["mountpoint-termination-grace"],
    extraLabels: config["mountpoint-pod-labels"] ? JSON.parse(config["mountpoint-pod-labels"]) : {},
    cpuRequest: config["mountpoint-cpu-request"],
    memoryRequest: config["mountpoint-memory-request"],
    memoryLimit: config["mountpoint-memory-limit"],
    caConfigMap: config["tls-ca-configmap"],
    workSizeLimit: config["mountpoint-work-size-limit"],
    cacheSizeLimit: config["mountpoint-cache-size-limit"],
    metricsPort: config["mountpoint-metrics-port"],
  };
}

/** Headroom settings from the controller's configuration (off unless all three are set). */
export function headroomConfig(config: ControllerConfig): HeadroomConfig {
  return {
    namespace: config["mountpoint-namespace"],
    image: config["mountpoint-headroom-image"],
    priorityClassName: config["mountpoint-headroom-priority-class-name"],
    preemptingPriorityClassName: config["mountpoint-preempting-priority-class-name"],
  };
}

/** Run the controller until `signal` aborts; resolves with the exit code. */
export async function runController(
  config: ControllerConfig,
  signal: AbortSignal,
  deps: ControllerDeps,
): Promise<number> {
  const log = logger("controller");
  const endpoint = config["csi-endpoint"];
  if (!config.reconciler && !endpoint) {
    throw new ConfigError(
      "--reconciler=false leaves nothing to do: set --csi-endpoint to serve the CSI Controller service",
    );
  }
  const election = {
    leaseDurationMs: config["leader-election-lease-duration"],
    renewDeadlineMs: config["leader-election-renew-deadline"],
    retryPeriodMs: config["leader-election-retry-period"],
  };
  const problem = config.reconciler && config["leader-elect"]
    ? leaderElectionProblem(election)
    : undefined;
  if (problem) throw new ConfigError(`leader election: ${problem}`);
  const metrics = new PromControllerMetrics();
  let leading = false;
  let synced = false;
  // Serves until the controller ends, also when it ends on its own (leadership lost).
  const serving = new AbortController();
  const stopServing = () => serving.abort();
  signal.addEventListener("abort", stopServing, { once: true });
  const health = config["metrics-address"]
    ? await startHealthServer({
      address: config["metrics-address"],
      signal: serving.signal,
      ready: () => !config.reconciler || !config["leader-elect"] || !leading || synced,
      metrics: async () => ({
        contentType: metrics.registry.contentType,
        body: await metrics.registry.metrics(),
      }),
    })
    : undefined;
  const provisioning = endpoint ? await deps.createProvisioning(config) : undefined;
  if (provisioning) {
    log.info("Controller service: S3 endpoint {endpoint}, driver credentials {driverCredentials}", {
      endpoint: config["s3-endpoint-url"] || "(AWS)",
      driverCredentials: provisioning.driverCredentials ? "configured" : "none",
    });
  }
  const csi = endpoint
    ? new CsiServer({
      socketPath: parseEndpoint(endpoint),
      services: {
        identity: new IdentityService({ controllerService: true }),
        controller: provisioning!.service,
      },
    })
    : undefined;
  await csi?.start();

  let code = 0;
  if (!config.reconciler) {
    log.info("Starting {version}: CSI Controller service only (no reconciler, no Kubernetes API)", {
      version: DRIVER_VERSION,
    });
    await aborted(signal);
  } else {
    code = await runLeading(config, signal, metrics, election, (l, s) => {
      leading = l;
      synced = s;
    });
  }
  await csi?.stop(config["shutdown-grace"]);
  provisioning?.close();
  serving.abort();
  signal.removeEventListener("abort", stopServing);
  await health?.finished;
  return code;
}

/** Connect to the API, contend for the lease (unless disabled) and reconcile while leading. */
async function runLeading(
  config: ControllerConfig,
  signal: AbortSignal,
  metrics: PromControllerMetrics,
  election: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number },
  state: (leading: boolean, synced: boolean) => void,
): Promise<number> {
  const log = logger("controller");
  const kube = loadKubeConfig();
  const identity = `${Deno.env.get("POD_NAME") ?? Deno.hostname()}_${
    crypto.randomUUID().slice(0, 8)
  }`;
  const userAgent = `s3-csi-controller/${DRIVER_VERSION} (${identity})`;
  const requestTimeoutMs = config["api-timeout"];
  log.info("Starting controller {version} as {identity}; Kubernetes API {server} from {source}", {
    version: DRIVER_VERSION,
    identity,
    server: kube.server,
    source: kube.source,
  });
  // The lease has its own client (its requests never queue behind the workers'); the workers'
  // client refuses every write once the lease is no longer valid by this process's clock.
  const elector = config["leader-elect"]
    ? new LeaderElector({
      client: new RestKubeClient(kube.config, { userAgent, requestTimeoutMs }),
      namespace: config["leader-election-namespace"],
      name: LEADER_LEASE_NAME,
      identity,
      ...election,
      onStartedLeading: (leaderSignal) => lead(leaderSignal),
    })
    : undefined;
  const client = new RestKubeClient(kube.config, {
    userAgent,
    requestTimeoutMs,
    ...(elector ? { fence: elector } : {}),
  });
  metrics.trackRequests(() => client.counts);
  const lead = async (leaderSignal: AbortSignal) => {
    state(true, false);
    await runReconciler(config, client, identity, metrics, leaderSignal, () => state(true, true));
    state(false, false);
  };
  let code = 0;
  if (elector) {
    const outcome = await elector.run(signal);
    if (outcome === "lost") code = EXIT_LOST_LEADERSHIP;
  } else {
    await lead(signal);
  }
  await client.close();
  return code;
}

/** Informers + queue + cleaner, until `signal` aborts. */
async function runReconciler(
  config: ControllerConfig,
  apiClient: KubeClient,
  identity: string,
  metrics: PromControllerMetrics,
  signal: AbortSignal,
  onSynced: () => void,
): Promise<void> {
  const log = logger("controller");
  // Every call of this term ends with it (in flight or not): a stepped-down leader stops at once.
  const client = withSignal(apiClient, signal);
  const caches: ControllerCaches = {
    pods: new Informer<Pod>(client, PODS, { resyncMs: 10 * 60_000, transform: slimPod }),
    pvcs: new Informer<PersistentVolumeClaim>(client, PVCS, { transform: withoutManagedFields }),
    pvs: new Informer<PersistentVolume>(client, PVS, { transform: withoutManagedFields }),
    s3pas: new Informer<MountpointS3PodAttachment>(client, S3PAS, {
      transform: withoutManagedFields,
    }),
    serviceAccounts: new Informer<ServiceAccount>(client, SERVICE_ACCOUNTS, {
      transform: slimServiceAccount,
    }),
    nodes: new Informer<KubeObject>(client, NODES, { transform: slimNode }),
  };
  registerIndexes(caches);
  const podConfig = mountpointPodConfig(config);
  const reconciler = new Reconciler({
    client,
    caches,
    podConfig,
    recorder: new ApiEventRecorder(client, "s3-csi-controller", identity),
    metrics,
    headroom: headroomConfig(config),
  });
  const queue = new WorkQueue({
    workers: config.workers,
    process: (key) => reconciler.reconcile(key),
    observe: (_, outcome, seconds) => metrics.reconcile(outcome, seconds),
  });
  const enqueuePod = (p: Pod) => queue.add(objectKey(p));
  caches.pods.on({
    add: enqueuePod,
    update: (_, p) => enqueuePod(p),
    delete: (p) => {
      reconciler.podDeleted(p);
      enqueuePod(p);
    },
  });
  const enqueueClaimUsers = (c: PersistentVolumeClaim) => {
    for (const p of caches.pods.byIndex(INDEX.podClaim, objectKey(c))) enqueuePod(p);
  };
  caches.pvcs.on({ add: enqueueClaimUsers, update: (_, c) => enqueueClaimUsers(c) });
  // A role annotation added or changed: the account's pods are tried again (those waiting for
  // it get their Mountpoint Pod; attached ones are left as they are).
  const role = (sa: ServiceAccount | undefined) => sa?.metadata.annotations?.[ANNOTATION_ROLE_ARN];
  caches.serviceAccounts.on({
    update: (old, sa) => {
      if (role(old) === role(sa)) return;
      for (const p of caches.pods.byIndex(INDEX.podServiceAccount, objectKey(sa))) enqueuePod(p);
    },
  });
  caches.s3pas.on({
    delete: (s) => {
      // Someone deleted an attachment: re-check its workloads and Mountpoint Pods.
      for (const [mp, list] of Object.entries(s.spec?.mountpointS3PodAttachments ?? {})) {
        queue.add(`${podConfig.namespace}/${mp}`);
        for (const a of list) {
          for (const p of caches.pods.byIndex(INDEX.podUID, a.workloadPodUID)) enqueuePod(p);
        }
      }
    },
  });
  const informers = Object.values(caches).map((i) => i.run(signal));
  try {
    await Promise.all(Object.values(caches).map((i) => i.waitForSync(120_000, signal)));
  } catch (err) {
    if (!signal.aborted) log.error("Caches did not sync: {error}", { error: errorMessage(err) });
    await Promise.allSettled(informers);
    return;
  }
  onSynced();
  log.info("Caches synced: {pods} pods, {attachments} attachments; reconciling", {
    pods: caches.pods.list().length,
    attachments: caches.s3pas.list().length,
  });
  const gauges = setInterval(() => {
    const podsByPhase: Record<string, number> = {};
    for (const p of caches.pods.list()) {
      if (
        p.metadata.namespace === podConfig.namespace &&
        p.metadata.labels?.[LABEL_COMPONENT] === COMPONENT_MOUNTPOINT_POD
      ) {
        const phase = p.status?.phase ?? "Unknown";
        podsByPhase[phase] = (podsByPhase[phase] ?? 0) + 1;
      }
    }
    const s3pas = caches.s3pas.list();
    metrics.gauges({
      attachments: s3pas.length,
      workloads: s3pas.reduce(
        (n, s) => n + Object.values(s.spec.mountpointS3PodAttachments).flat().length,
        0,
      ),
      podsByPhase,
    });
  }, 5_000);
  // Started only now (caches synced): its first pass releases at once the workloads deleted before
  // this leader's caches existed, which no informer event will ever report.
  const cleaner = new StaleCleaner({
    client,
    caches,
    reconciler,
    namespace: podConfig.namespace,
    intervalMs: config["stale-cleanup-interval"],
    thresholdMs: config["stale-attachment-threshold"],
  });
  await Promise.all([queue.run(signal), cleaner.run(signal), ...informers]);
  clearInterval(gauges);
}
