/**
 * The real-node tier's harness: one real single-node cluster for the whole tier
 * (`tests/testbed/services/real_node/`: kubelet + containerd + a real control plane), a Ceph RGW
 * of its own reached by pods through a relay on the node address, our images built and imported,
 * and the driver installed by `deno task deploy` — then the shared e2e scenarios
 * (`tests/scenarios/`) and the real-node-only ones run on it as tests (a scenario that needs two
 * nodes starts the second node of `worker.sh` first), and the last two tests undeploy the driver
 * and stop the node(s), checking that nothing is left (`check_clean.sh`).
 *
 * Tests register at load time; on a machine that cannot run a real node (not root, containerd or
 * CNI packages missing, no Go and nothing cached, another kubelet) every test is reported as
 * skipped with the reason.
 *
 * @module
 */
import type { KubeObject } from "../../src/kube/client.ts";
import { NAMESPACES, SERVICE_ACCOUNTS } from "../../src/kube/resources.ts";
import { type S3Server, startS3Server } from "../testbed/sandbox/s3_server.ts";
import {
  type RealNode,
  realNodeLeftovers,
  realNodeSkipReason,
  type RealWorker,
  startRealNode,
  startRealWorker,
  stopRealNode,
} from "../testbed/services/real_node/real_node.ts";
import {
  buildDriverImages,
  deployDriver,
  type DeployedDriver,
  driverRegistered,
  DriverVersions,
  imageArchives,
  resolveEngine,
} from "../testbed/services/real_node/driver.ts";
import { DRIVER_NAMESPACE, RealNodeCluster } from "../testbed/services/real_node/cluster.ts";
import { startTcpRelay, type TcpRelay } from "../testbed/services/real_node/tcp_relay.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, stepsOf } from "../scenarios/cluster.ts";

/** Print one line to stderr (collected in the tier's report). */
export function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`REAL_NODE ${line}\n`));
}

export { DRIVER_NAMESPACE, RealNodeCluster };

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
  /** The driver images' OCI archives (a second node imports them too). */
  archives?: string[] | undefined;
  /** The second node, once a scenario needed it. */
  worker?: RealWorker | undefined;
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
  const images = await timed(
    "driver images built and imported",
    () => buildDriverImages(node, `${logDir}/images.log`, engineBin),
  );
  started.archives = imageArchives(images);
  const driver = await timed("deno task deploy (until rolled out)", () =>
    deployDriver(node, {
      endpoint: podEndpoint,
      region: s3.env.AWS_REGION,
      accessKeyId: s3.env.AWS_ACCESS_KEY_ID,
      secretAccessKey: s3.env.AWS_SECRET_ACCESS_KEY,
    }, `${logDir}/deploy.log`));
  started.driver = driver;
  const ns = `rn-${crypto.randomUUID().slice(0, 8)}`;
  const workers = () => started.worker ? [started.worker] : [];
  const cluster = new RealNodeCluster(
    node,
    s3.env,
    ns,
    workers,
    new DriverVersions({ node, workers, engineBin, driver: () => started.driver, logDir }),
  );
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
 * The second node (`worker.sh`), started on first use with the driver's images, its node plugin
 * registered. It stays until the tier stops: the scenarios that need it run last.
 */
export async function worker(tier: Tier): Promise<RealWorker> {
  if (started.worker) return started.worker;
  const w = await timed("second node start (worker.sh)", async () => {
    const w = await startRealWorker({
      env: { REAL_NODE_IMPORT: (started.archives ?? []).join(" ") },
    });
    await driverRegistered(tier.cluster.client, w.nodeName, 120_000);
    return w;
  });
  return started.worker = w;
}

/**
 * Stop the relay, the S3 server and the node (`stop.sh`, which also deletes what is left on the
 * cluster, stops the second node and checks the host); resolves with what could not be done. Used
 * by the last test.
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
    started.worker = undefined;
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

/**
 * Declare a shared scenario as a test of the tier; one that needs two nodes starts the second one
 * first ({@link worker}). What a step measured is reported.
 */
export function realNodeScenario(scenario: Scenario): void {
  realNodeTest(`real node: ${scenario.name}`, async (tier, t) => {
    if (scenario.nodes > 1) await worker(tier);
    await scenario.run(tier.cluster, stepsOf(t, (step, d) => report(`${step}: ${d}`)));
  });
}

/** Leftovers of a stopped node (check_clean.sh). */
export { realNodeLeftovers };
