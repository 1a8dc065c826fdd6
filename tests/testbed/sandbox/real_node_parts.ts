/**
 * `deno task sandbox --real-node`: the sandbox's parts on the real single-node cluster
 * (`tests/testbed/services/real_node/`) instead of emulators and processes — the node started (or
 * reused), a relay that lets pods reach the sandbox's S3 server on the host's loopback, our images
 * built and imported, and the driver installed with `deno task deploy`; at the end
 * `deno task undeploy --purge` and, when the sandbox started the node, `stop.sh` (which checks that
 * nothing is left on the host). Each part is one reported step.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../../../src/kube/client.ts";
import { CSI_NODES } from "../../../src/kube/resources.ts";
import { DRIVER_NAME } from "../../../src/util/version.ts";
import { waitFor } from "../../../src/util/wait_for.ts";
import {
  buildDriverImages,
  deployDriver,
  type DeployedDriver,
  resolveEngine,
} from "../services/real_node/driver.ts";
import { containerLog } from "../services/real_node/host.ts";
import {
  type RealNode,
  realNodeLeftovers,
  startRealNode,
  stopRealNode,
} from "../services/real_node/real_node.ts";
import { startTcpRelay, type TcpRelay } from "../services/real_node/tcp_relay.ts";
import type { Pod } from "../kubelet/k8s_types.ts";
import type { S3Server } from "./s3_server.ts";
import type { StepReporter } from "./step_reporter.ts";

/** The real node and what the sandbox put on it. */
export class RealNodeParts {
  node: RealNode | undefined;
  relay: TcpRelay | undefined;
  driver: DeployedDriver | undefined;
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
    await waitFor("CSINode to list the driver", async () => {
      const n = await client.get<{ spec?: { drivers?: { name: string }[] } } & KubeObject>(
        CSI_NODES,
        node.nodeName,
      );
      return n?.spec?.drivers?.some((d) => d.name === DRIVER_NAME) ?? false;
    }, { timeoutMs: 30_000, intervalMs: 200 });
    return node.nodeName;
  }

  /** Output of a container (the kubelet's log files). */
  log(pod: Pod, container: string): Promise<string> {
    return this.node ? containerLog(this.node, pod, container) : Promise.resolve("");
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
