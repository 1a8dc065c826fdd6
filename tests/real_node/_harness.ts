/**
 * The real-node tier's harness: one real single-node cluster for the whole tier
 * (`tests/testbed/services/real_node/`: kubelet + containerd + a real control plane), a Ceph RGW
 * of its own reached by pods through a relay on the node address, our images built and imported,
 * and the driver installed by `deno task deploy` — then the shared e2e scenarios
 * (`tests/scenarios/`) and the real-node-only ones run on it as tests, and the last two tests
 * undeploy the driver and stop the node, checking that nothing is left (`check_clean.sh`).
 *
 * Tests register at load time; on a machine that cannot run a real node (not root, containerd or
 * CNI packages missing, no Go and nothing cached, another kubelet) every test is reported as
 * skipped with the reason.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { NAMESPACES, PODS, SERVICE_ACCOUNTS } from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { CREDENTIALS_FILE } from "../../src/node/credentials.ts";
import { type MountInfo, readMountInfo } from "../../src/sys/mountinfo.ts";
import { DEFAULT_KUBELET_ROOT } from "../../src/mppod/paths.ts";
import { NODE_CONTAINERS } from "../../src/deploy/render_node.ts";
import { NODE_DAEMONSET } from "../../src/deploy/names.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { type S3Env, type S3Server, startS3Server } from "../testbed/sandbox/s3_server.ts";
import {
  type RealNode,
  realNodeLeftovers,
  realNodeSkipReason,
  startRealNode,
  stopRealNode,
} from "../testbed/services/real_node/real_node.ts";
import {
  buildDriverImages,
  deployDriver,
  type DeployedDriver,
  resolveEngine,
} from "../testbed/services/real_node/driver.ts";
import { containerLog, hostProcesses } from "../testbed/services/real_node/host.ts";
import { startTcpRelay, type TcpRelay } from "../testbed/services/real_node/tcp_relay.ts";
import { waitFor } from "../_helpers.ts";
import { findFiles, type Scenario, ScenarioCluster, stepsOf } from "../scenarios/cluster.ts";

/** Print one line to stderr (collected in the tier's report). */
export function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`REAL_NODE ${line}\n`));
}

/** Namespace of the driver's own pods (node plugin, controller). */
export const DRIVER_NAMESPACE: string = defaultValues().namespace;

/** The real node as a {@link ScenarioCluster}. */
export class RealNodeCluster extends ScenarioCluster {
  readonly node: RealNode;
  readonly #client: RestKubeClient;
  readonly #s3: S3Env;
  readonly #ns: string;

  constructor(node: RealNode, s3: S3Env, ns: string) {
    super();
    this.node = node;
    this.#s3 = s3;
    this.#ns = ns;
    this.#client = new RestKubeClient(kubeConfigFromFile(node.kubeconfig), {
      userAgent: "s3csi-real-node-tests",
    });
  }

  get client(): KubeClient {
    return this.#client;
  }

  /** The RGW as this process reaches it (loopback; pods go through the relay). */
  get s3Env(): S3Env {
    return this.#s3;
  }

  get ns(): string {
    return this.#ns;
  }

  get workloadImage(): { image: string; pullPolicy: string } {
    return { image: `${this.node.imagePrefix}/busybox:host`, pullPolicy: "Never" };
  }

  /** `deno task deploy` renders the admission policies of volumes (`validateVolumes`). */
  override get volumeAdmission(): boolean {
    return true;
  }

  /** The real kubelet kills on time; no need to wait longer than 1 s for PID 1 `sleep`s. */
  override get workloadGraceSeconds(): number {
    return 1;
  }

  nodeNames(): string[] {
    return [this.node.nodeName];
  }

  kubeletRoot(_node: string): string {
    return DEFAULT_KUBELET_ROOT;
  }

  log(pod: Pod, container = "main"): Promise<string> {
    return containerLog(this.node, pod, container);
  }

  /** The node plugin pod (of the DaemonSet). */
  async nodePluginPod(): Promise<Pod | undefined> {
    return (await this.client.list<Pod>(PODS, {
      namespace: DRIVER_NAMESPACE,
      labelSelector: `app=${NODE_DAEMONSET}`,
    })).items[0];
  }

  protected async nodePluginLogs(): Promise<string> {
    const pod = await this.nodePluginPod();
    if (!pod) return "\n--- no node plugin pod";
    const restarts = pod.status?.containerStatuses?.find((c) => c.name === NODE_CONTAINERS.plugin)
      ?.restartCount ?? 0;
    const text = await containerLog(this.node, pod, NODE_CONTAINERS.plugin);
    return `\n--- node plugin ${pod.metadata.name} (restarts ${restarts}), last lines:\n${
      text.slice(-1500)
    }`;
  }

  /** FUSE mounts under the kubelet root, as the host sees them (the root is a shared mount). */
  async fuseMounts(): Promise<MountInfo[]> {
    return (await readMountInfo()).filter((m) =>
      m.mountPoint.startsWith(`${DEFAULT_KUBELET_ROOT}/`) && m.fsType.startsWith("fuse")
    );
  }

  async credentialFiles(): Promise<string[]> {
    return await findFiles(
      `${DEFAULT_KUBELET_ROOT}/pods`,
      (p, info) =>
        p.endsWith(`/${CREDENTIALS_FILE}`) || (info.isDirectory && p.endsWith("/credentials")),
    );
  }

  /** UIDs of the pods of the driver's namespace (node plugin, controller). */
  async #driverPodUids(): Promise<Set<string>> {
    return new Set(
      (await this.client.list<Pod>(PODS, { namespace: DRIVER_NAMESPACE })).items.map((p) =>
        p.metadata.uid
      ),
    );
  }

  /** Processes of every pod but the driver's own (workloads, Mountpoint Pods, their engines). */
  async engineProcesses(_buckets: readonly string[]): Promise<string[]> {
    const driver = await this.#driverPodUids();
    return (await hostProcesses()).filter((p) => p.podUid && !driver.has(p.podUid)).map((p) =>
      `${p.pid} pod ${p.podUid}: ${p.cmdline.slice(0, 400)}`
    );
  }

  async leftoverPodDirs(uids: readonly string[]): Promise<string[]> {
    const left: string[] = [];
    for (const uid of uids) {
      const dir = `${DEFAULT_KUBELET_ROOT}/pods/${uid}`;
      if (await Deno.lstat(dir).then(() => true, () => false)) left.push(dir);
    }
    return left;
  }

  async foreignSockets(): Promise<string[]> {
    const driver = await this.#driverPodUids();
    const sockets = await findFiles(
      `${DEFAULT_KUBELET_ROOT}/pods`,
      (_p, info) => info.isSocket === true,
    );
    return sockets.filter((s) => !driver.has(s.split("/")[5] ?? ""));
  }

  /** Close the API client and the S3 clients. */
  async dispose(): Promise<void> {
    this.close();
    await this.#client.close();
  }
}

/** Everything the tier started. */
export interface Tier {
  readonly node: RealNode;
  readonly s3: S3Server;
  readonly relay: TcpRelay;
  readonly driver: DeployedDriver;
  readonly cluster: RealNodeCluster;
  /** The S3 endpoint the driver's pods use. */
  readonly podEndpoint: string;
  /** Where the harness writes its logs (image build, deploy, RGW start). */
  readonly logDir: string;
}

/** Measured durations (label → ms), printed by the last test. */
export const TIMINGS: Map<string, number> = new Map();

async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    const ms = performance.now() - t0;
    TIMINGS.set(label, ms);
    report(`${label}: ${(ms / 1000).toFixed(1)} s`);
  }
}

/** What was started so far (the last tests stop it, whatever happened). */
const started: {
  node?: RealNode | undefined;
  s3?: S3Server | undefined;
  relay?: TcpRelay | undefined;
  driver?: DeployedDriver | undefined;
  cluster?: RealNodeCluster | undefined;
  logDir?: string | undefined;
} = {};
let setup: Promise<Tier> | undefined;

/** The tier's cluster: started on first use, shared by every test of the tier. */
export function tier(): Promise<Tier> {
  return setup ??= startTier();
}

/**
 * The tier's S3 server: `REAL_NODE_S3` (`rgw` or `versitygw`) when set; else versitygw (the
 * Mountpoint image's default engine is `mount-s3`, and Ceph RGW 16 refuses its multipart uploads,
 * see `tests/engine/data_test.ts`).
 */
export function realNodeS3Choice(): "rgw" | "versitygw" {
  const set = Deno.env.get("REAL_NODE_S3");
  if (set === "rgw" || set === "versitygw") return set;
  if (set) throw new Error(`REAL_NODE_S3 must be rgw or versitygw, got "${set}"`);
  return "versitygw";
}

async function startTier(): Promise<Tier> {
  // The engine first: a cold build takes minutes, no need for a cluster to idle meanwhile.
  const engineLog = await Deno.makeTempFile({ prefix: "s3csi-real-node-engine-", suffix: ".log" });
  const engine = await timed(
    "mount-s3 engine (scripts/build_engine.sh)",
    () => resolveEngine(engineLog),
  );
  const node = await timed("cluster start (start.sh)", () => startRealNode());
  started.node = node;
  const logDir = `${node.state}/tests`;
  await Deno.mkdir(logDir, { recursive: true });
  started.logDir = logDir;
  await Deno.copyFile(engineLog, `${logDir}/engine.log`);
  await Deno.remove(engineLog);
  if (!engine.bin) {
    throw new Error(
      `the Mountpoint image needs mount-s3 and s3-csi-supervisor (scripts/build_engine.sh): ${engine.reason}`,
    );
  }
  const engineBin = engine.bin;
  report(`Mountpoint image engines: mount-s3 (${engineBin}) and rclone; mount-s3 is the default`);
  const choice = realNodeS3Choice();
  const s3 = await timed(
    `S3 server start (${choice})`,
    () => startS3Server(choice, logDir, logDir, new AbortController().signal),
  );
  started.s3 = s3;
  const target = new URL(s3.env.S3_ENDPOINT);
  const relay = startTcpRelay({
    hostname: node.nodeIp,
    target: { hostname: target.hostname, port: Number(target.port) },
  });
  started.relay = relay;
  const podEndpoint = `http://${node.nodeIp}:${relay.port}`;
  report(`S3 for pods: ${podEndpoint} → ${s3.env.S3_ENDPOINT} (relay in the test process)`);
  await timed(
    "driver images built and imported",
    () => buildDriverImages(node, `${logDir}/images.log`, engineBin),
  );
  const driver = await timed("deno task deploy (until rolled out)", () =>
    deployDriver(node, {
      endpoint: podEndpoint,
      region: s3.env.AWS_REGION,
      accessKeyId: s3.env.AWS_ACCESS_KEY_ID,
      secretAccessKey: s3.env.AWS_SECRET_ACCESS_KEY,
    }, `${logDir}/deploy.log`));
  started.driver = driver;
  const ns = `rn-${crypto.randomUUID().slice(0, 8)}`;
  const cluster = new RealNodeCluster(node, s3.env, ns);
  started.cluster = cluster;
  await cluster.client.create(NAMESPACES, { metadata: { name: ns } } as KubeObject);
  await waitFor(
    `ServiceAccount ${ns}/default`,
    async () => !!(await cluster.client.get(SERVICE_ACCOUNTS, "default", ns)),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  return { node, s3, relay, driver, cluster, podEndpoint, logDir };
}

/**
 * Stop the relay, the S3 server and the node (`stop.sh`, which also deletes what is left on the
 * cluster and checks the host); resolves with what could not be done. Used by the last test.
 */
export async function stopTier(): Promise<string[]> {
  const problems: string[] = [];
  await started.cluster?.dispose().catch(() => {});
  started.cluster = undefined;
  await started.relay?.close();
  started.relay = undefined;
  if (started.s3) {
    await started.s3.stop().catch((err) => problems.push(`S3 server stop: ${err}`));
    started.s3 = undefined;
  }
  if (started.node) {
    await stopRealNode().catch((err) => problems.push(`stop.sh: ${err}`));
    started.node = undefined;
  }
  return problems;
}

/** The driver as deployed (for the undeploy test). */
export function deployed(): DeployedDriver | undefined {
  return started.driver;
}

/** Forget the driver (undeployed). */
export function markUndeployed(): void {
  started.driver = undefined;
}

const SKIP = realNodeSkipReason();
if (SKIP) report(`SKIP: ${SKIP}`);

function register(name: string, fn: (t: Deno.TestContext) => Promise<void>): void {
  Deno.test({
    name: SKIP ? `${name} (skipped: ${SKIP})` : name,
    ignore: SKIP !== undefined,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      const t0 = performance.now();
      try {
        await fn(t);
      } finally {
        const ms = performance.now() - t0;
        TIMINGS.set(name, ms);
        report(`${name}: ${(ms / 1000).toFixed(1)} s`);
      }
    },
  });
}

/**
 * Declare a test of the tier on the running cluster (started by the first test that needs it);
 * skipped with the reason where the tier cannot run.
 */
export function realNodeTest(
  name: string,
  fn: (tier: Tier, t: Deno.TestContext) => Promise<void>,
): void {
  register(name, async (t) => await fn(await tier(), t));
}

/** Declare a test that runs whether or not the cluster came up (the undeploy and stop tests). */
export function realNodeFinalTest(name: string, fn: (t: Deno.TestContext) => Promise<void>): void {
  register(name, fn);
}

/** Declare a shared scenario as a test of the tier. */
export function realNodeScenario(scenario: Scenario): void {
  realNodeTest(`real node: ${scenario.name}`, (tier, t) => scenario.run(tier.cluster, stepsOf(t)));
}

/** Leftovers of a stopped node (check_clean.sh). */
export { realNodeLeftovers };
