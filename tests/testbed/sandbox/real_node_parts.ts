/**
 * `deno task sandbox --real-node`: the sandbox's parts on the real cluster
 * (`tests/testbed/services/real_node/`) instead of emulators and processes — the node started (or
 * reused), a relay that lets pods reach the sandbox's S3 server on the host's loopback, our images
 * built and imported, the driver installed with `deno task deploy`, and for a scenario that needs
 * two nodes the second node (`worker.sh`); at the end `deno task undeploy --purge`, the second node
 * stopped and, when the sandbox started the node, `stop.sh` (which checks that nothing is left on
 * the host). Each part is one reported step.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import {
  buildDriverImages,
  deployDriver,
  type DeployedDriver,
  driverRegistered,
  DriverVersions,
  imageArchives,
  resolveEngine,
} from "../services/real_node/driver.ts";
import { containerLog } from "../services/real_node/host.ts";
import {
  type RealNode,
  realNodeLeftovers,
  type RealWorker,
  startRealNode,
  startRealWorker,
  stopRealNode,
  stopRealWorker,
} from "../services/real_node/real_node.ts";
import { startTcpRelay, type TcpRelay } from "../services/real_node/tcp_relay.ts";
import type { Pod } from "../kubelet/k8s_types.ts";
import type { S3Server } from "./s3_server.ts";
import type { StepReporter } from "./step_reporter.ts";

/** The real node and what the sandbox put on it. */
export class RealNodeParts {
  node: RealNode | undefined;
  /** The second node, when a scenario needs one. */
  worker: RealWorker | undefined;
  relay: TcpRelay | undefined;
  driver: DeployedDriver | undefined;
  /** The driver images' OCI archives (imported into a second node too). */
  #archives: string[] = [];
  readonly #r: StepReporter;
  readonly #logDir: string;
  readonly #signal: AbortSignal;

  constructor(r: StepReporter, logDir: string, signal: AbortSignal) {
    this.#r = r;
    this.#logDir = logDir;
    this.#signal = signal;
  }

  /** Start (or reuse) the node; resolves with it, or undefined when the step failed. */
  async startNode(): Promise<RealNode | undefined> {
    return this.node = await this.#r.step(
      "Real node: containerd + kubelet + etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy",
      () => startRealNode({ signal: this.#signal }),
      (n) =>
        `node ${n.nodeName} at ${n.nodeIp} (${
          n.startedHere ? "started" : "already running, reused"
        }; logs ${n.state}/logs)`,
    );
  }

  /**
   * The `mount-s3` engine (with `s3-csi-supervisor` beside it) for the Mountpoint image
   * (`scripts/build_engine.sh`, cached). Decides the S3 server: Ceph RGW 16 refuses mount-s3's
   * multipart uploads.
   */
  engine: string | undefined;

  /** Find (or build) the engine; resolves false when the step failed. */
  async findEngine(): Promise<boolean> {
    const bin = await this.#r.step(
      "mount-s3 engine and supervisor for the Mountpoint image (scripts/build_engine.sh)",
      async () => {
        const x = await resolveEngine(`${this.#logDir}/images.log`, this.#signal);
        if (!x.bin) {
          throw new Error(`the Mountpoint image needs mount-s3 and s3-csi-supervisor: ${x.reason}`);
        }
        return x.bin;
      },
      (x) => `${x} (the Mountpoint Pods' default engine)`,
    );
    this.engine = bin;
    return bin !== undefined;
  }

  /** Relay on the node address to the S3 server, build + import images, deploy the driver. */
  async deploy(s3: S3Server): Promise<boolean> {
    const node = this.node!;
    const r = this.#r;
    const relay = await r.step("S3 for pods: a relay on the node address", () => {
      const target = new URL(s3.env.S3_ENDPOINT);
      this.relay = startTcpRelay({
        hostname: node.nodeIp,
        target: { hostname: target.hostname, port: Number(target.port) },
      });
      return Promise.resolve(this.relay);
    }, (x) => `http://${x.hostname}:${x.port} → ${s3.env.S3_ENDPOINT}`);
    if (!relay) return false;
    const images = await r.step(
      "Driver images built and imported into containerd (scripts/build_images_local.ts)",
      () => buildDriverImages(node, `${this.#logDir}/images.log`, this.engine!, this.#signal),
      (out) =>
        out.trim().split("\n").map((l) => l.split(" ")[0]!.replace(/^IMAGE_\w+=/, "")).join(", "),
    );
    if (images === undefined) return false;
    this.#archives = imageArchives(images);
    const driver = await r.step(
      "Driver deployed (deno task deploy): CSIDriver, controller, provisioning (csi-provisioner), node plugin + registrar + livenessprobe, all Ready",
      async () =>
        this.driver = await deployDriver(
          node,
          {
            endpoint: `http://${relay.hostname}:${relay.port}`,
            region: s3.env.AWS_REGION,
            accessKeyId: s3.env.AWS_ACCESS_KEY_ID,
            secretAccessKey: s3.env.AWS_SECRET_ACCESS_KEY,
          },
          `${this.#logDir}/deploy.log`,
          this.#signal,
        ),
      (d) => `values ${d.valuesPath} (images, pull policy and S3 endpoint only)`,
    );
    return driver !== undefined;
  }

  /** Wait until the kubelet lists the driver in CSINode (the registrar registered it). */
  async registered(client: KubeClient): Promise<string> {
    const node = this.node!;
    await driverRegistered(client, node.nodeName, 30_000);
    return node.nodeName;
  }

  /**
   * Start (or reuse) the second node with the driver images, and wait until its node plugin is
   * registered; resolves false when the step failed.
   */
  async startWorker(client: KubeClient): Promise<boolean> {
    const w = await this.#r.step(
      "Second node: containerd + kubelet + kube-proxy in their own network and mount namespaces (worker.sh), driver registered",
      async () => {
        this.worker = await startRealWorker({
          env: { REAL_NODE_IMPORT: this.#archives.join(" ") },
          signal: this.#signal,
        });
        await driverRegistered(client, this.worker.nodeName, 120_000);
        return this.worker;
      },
      (x) =>
        `node ${x.nodeName} at ${x.nodeIp} (${
          x.startedHere ? "started" : "already running, reused"
        }; logs ${x.state}/logs)`,
    );
    return w !== undefined;
  }

  /** Other driver versions for the upgrade scenario (built from this tree, deployed). */
  versions(): DriverVersions | undefined {
    const node = this.node;
    const engineBin = this.engine;
    if (!node || !engineBin) return undefined;
    return new DriverVersions({
      node,
      workers: () => this.worker ? [this.worker] : [],
      engineBin,
      driver: () => this.driver,
      logDir: this.#logDir,
    });
  }

  /** Output of a container (the kubelets' log files). */
  async log(pod: Pod, container: string): Promise<string> {
    for (const n of [this.node, this.worker]) {
      const text = n ? await containerLog(n, pod, container) : "";
      if (text) return text;
    }
    return "";
  }

  /** Undeploy, stop the relay, and stop the node if this sandbox started it. */
  async stop(): Promise<void> {
    const r = this.#r;
    if (this.driver) {
      const driver = this.driver;
      await r.step("Driver undeployed (deno task undeploy --purge)", async () => {
        const out = await driver.undeploy();
        this.driver = undefined;
        return out.trim().split("\n")[0] ?? "";
      }, (d) => d);
    }
    await this.relay?.close();
    this.relay = undefined;
    const worker = this.worker;
    if (worker?.startedHere) {
      await r.step("Second node stopped (worker.sh stop)", async () => {
        await stopRealWorker();
        return worker.nodeName;
      }, (n) => n);
    } else if (worker) {
      r.report("Second node", "info", "left running (it was running before the sandbox)");
    }
    this.worker = undefined;
    const node = this.node;
    if (!node) return;
    if (node.startedHere) {
      await r.step(
        "Real node stopped; nothing left on the host (stop.sh, check_clean.sh)",
        async () => {
          await stopRealNode();
          const left = await realNodeLeftovers();
          if (left.length) throw new Error(`left on the host: ${left.join("; ")}`);
          return "";
        },
      );
    } else {
      r.report("Real node", "info", "left running (it was running before the sandbox)");
    }
    this.node = undefined;
  }
}
