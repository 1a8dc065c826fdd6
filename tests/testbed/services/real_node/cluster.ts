/**
 * The real-node cluster (`start.sh`, and the second node of `worker.sh` when it runs) as a
 * {@link ScenarioCluster}: what the shared scenarios (`tests/scenarios/`) need, read the way only a
 * real node shows it — container logs from the kubelets' log files, FUSE mounts and files from each
 * node's own mount namespace (the second node's `/var/lib/kubelet` is its own dir), processes from
 * the kubepods cgroups. Used by the real-node tier (`tests/real_node/`) and
 * `deno task sandbox --real-node --scenario NAME`.
 *
 * @module
 */
import type { KubeClient } from "../../../../src/kube/client.ts";
import { kubeConfigFromFile } from "../../../../src/kube/kube_config.ts";
import { PODS } from "../../../../src/kube/resources.ts";
import { RestKubeClient } from "../../../../src/kube/rest_client.ts";
import { CREDENTIALS_FILE } from "../../../../src/node/credentials.ts";
import { type MountInfo, readMountInfo } from "../../../../src/sys/mountinfo.ts";
import { DEFAULT_KUBELET_ROOT } from "../../../../src/mppod/paths.ts";
import { NODE_CONTAINERS } from "../../../../src/deploy/render_node.ts";
import { NODE_DAEMONSET } from "../../../../src/deploy/names.ts";
import { defaultValues } from "../../../../src/deploy/values.ts";
import type { Pod } from "../../kubelet/k8s_types.ts";
import type { S3Env } from "../../sandbox/s3_server.ts";
import {
  findFiles,
  type FindFilesView,
  mountpointContainerStatus,
  ScenarioCluster,
} from "../../../scenarios/cluster.ts";
import {
  containerIdOf,
  containerLog,
  type HostProcess,
  hostProcesses,
  killContainer,
  processTree,
  taskPid,
} from "./host.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../../../../src/mppod/labels.ts";
import type { RealNode, RealWorker } from "./real_node.ts";
import type { DriverVersions } from "./driver.ts";

/** Namespace of the driver's own pods (node plugin, controller). */
export const DRIVER_NAMESPACE: string = defaultValues().namespace;

/** One node of the cluster as this process sees it. */
interface NodeView {
  readonly name: string;
  /** Where its kubelet writes container logs (`<state>/pod-logs`). */
  readonly state: string;
  /** A process in the node's mount namespace; undefined: this process's namespace. */
  nsPid(): Promise<number | undefined>;
}

/** The pid in a pid file, when that process is alive. */
async function livePid(path: string): Promise<number | undefined> {
  const pid = Number((await Deno.readTextFile(path).catch(() => "")).trim());
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return await Deno.stat(`/proc/${pid}`).then(() => pid, () => undefined);
}

/** The real node(s) as a {@link ScenarioCluster}. */
export class RealNodeCluster extends ScenarioCluster {
  readonly node: RealNode;
  readonly #client: RestKubeClient;
  readonly #s3: S3Env;
  readonly #ns: string;
  readonly #workers: () => readonly RealWorker[];
  readonly #versions: Pick<DriverVersions, "deploy"> | undefined;

  /**
   * `workers`: the second node(s) running now (asked on every use: they may join later);
   * `versions`: what deploys other driver versions ({@link deployVersion}).
   */
  constructor(
    node: RealNode,
    s3: S3Env,
    ns: string,
    workers: () => readonly RealWorker[] = () => [],
    versions?: Pick<DriverVersions, "deploy">,
  ) {
    super();
    this.node = node;
    this.#s3 = s3;
    this.#ns = ns;
    this.#workers = workers;
    this.#versions = versions;
    this.#client = new RestKubeClient(kubeConfigFromFile(node.kubeconfig), {
      userAgent: "s3csi-real-node-tests",
    });
  }

  get client(): KubeClient {
    return this.#client;
  }

  get kubeconfig(): string {
    return this.node.kubeconfig;
  }

  /** S3 as this process reaches it (loopback; pods go through the relay). */
  get s3Env(): S3Env {
    return this.#s3;
  }

  get ns(): string {
    return this.#ns;
  }

  get workloadImage(): { image: string; pullPolicy: string } {
    return { image: `${this.node.imagePrefix}/busybox:host`, pullPolicy: "Never" };
  }

  override deployVersion(version: string): Promise<string> {
    return this.#versions?.deploy(version) ?? super.deployVersion(version);
  }

  /** `deno task deploy` renders the admission policies of volumes (`validateVolumes`). */
  override get volumeAdmission(): boolean {
    return true;
  }

  /** The real kubelet kills on time; no need to wait longer than 1 s for PID 1 `sleep`s. */
  override get workloadGraceSeconds(): number {
    return 1;
  }

  #views(): NodeView[] {
    return [
      { name: this.node.nodeName, state: this.node.state, nsPid: () => Promise.resolve(undefined) },
      ...this.#workers().map((w) => ({
        name: w.nodeName,
        state: w.state,
        nsPid: async () =>
          await livePid(`${w.state}/kubelet.pid`) ?? await livePid(`${w.state}/containerd.pid`),
      })),
    ];
  }

  #view(node: string): NodeView {
    const v = this.#views().find((x) => x.name === node);
    if (!v) throw new Error(`no node ${node}`);
    return v;
  }

  /** The mount table of a node, and how this process reaches its paths. */
  async #mounts(v: NodeView): Promise<FindFilesView> {
    const pid = await v.nsPid();
    if (pid === undefined) return { mounts: await readMountInfo(), prefix: "" };
    return {
      mounts: await readMountInfo({ path: `/proc/${pid}/mountinfo` }).catch(() => []),
      prefix: `/proc/${pid}/root`,
    };
  }

  nodeNames(): string[] {
    return this.#views().map((v) => v.name);
  }

  /**
   * A node's containerd and state dir (for `host.ts`: container pids, killing a container the way a
   * crash would, container logs) — what real-node-only scenarios reach the host with.
   */
  nodeAccess(node: string): { containerdAddress: string; state: string } {
    if (node === this.node.nodeName) return this.node;
    const w = this.#workers().find((x) => x.nodeName === node);
    if (!w) throw new Error(`no node ${node}`);
    return w;
  }

  /** Each node's kubelet root, in its own mount namespace. */
  kubeletRoot(_node: string): string {
    return DEFAULT_KUBELET_ROOT;
  }

  async log(pod: Pod, container = "main"): Promise<string> {
    for (const v of this.#views()) {
      const text = await containerLog(v, pod, container);
      if (text) return text;
    }
    return "";
  }

  /** The node plugin pod (of the DaemonSet) of a node (the first node by default). */
  async nodePluginPod(node = this.node.nodeName): Promise<Pod | undefined> {
    return (await this.client.list<Pod>(PODS, {
      namespace: DRIVER_NAMESPACE,
      labelSelector: `app=${NODE_DAEMONSET}`,
    })).items.find((p) => p.spec.nodeName === node);
  }

  protected async nodePluginLogs(): Promise<string> {
    const out: string[] = [];
    for (const v of this.#views()) {
      const pod = await this.nodePluginPod(v.name);
      if (!pod) {
        out.push(`\n--- no node plugin pod on ${v.name}`);
        continue;
      }
      const restarts = pod.status?.containerStatuses?.find((c) =>
        c.name === NODE_CONTAINERS.plugin
      )?.restartCount ?? 0;
      const text = await containerLog(v, pod, NODE_CONTAINERS.plugin);
      out.push(
        `\n--- node plugin ${pod.metadata.name} on ${v.name} (restarts ${restarts}), last lines:\n${
          text.slice(-1500)
        }`,
      );
    }
    return out.join("");
  }

  async #fuseMountsOf(v: NodeView): Promise<MountInfo[]> {
    return (await this.#mounts(v)).mounts.filter((m) =>
      m.mountPoint.startsWith(`${DEFAULT_KUBELET_ROOT}/`) && m.fsType.startsWith("fuse")
    );
  }

  /** FUSE mounts under the kubelet roots, each node's as its own namespace sees them. */
  async fuseMounts(): Promise<MountInfo[]> {
    return (await Promise.all(this.#views().map((v) => this.#fuseMountsOf(v)))).flat();
  }

  override async fuseMountsOn(node: string): Promise<MountInfo[]> {
    return await this.#fuseMountsOf(this.#view(node));
  }

  /** Files under every node's `/var/lib/kubelet/pods` matching `pred` (paths of this process). */
  async #podFiles(pred: (path: string, info: Deno.FileInfo) => boolean): Promise<string[]> {
    const out: string[] = [];
    for (const v of this.#views()) {
      const view = await this.#mounts(v);
      out.push(...await findFiles(`${view.prefix}${DEFAULT_KUBELET_ROOT}/pods`, pred, view));
    }
    return out;
  }

  async credentialFiles(): Promise<string[]> {
    return await this.#podFiles((p, info) =>
      p.endsWith(`/${CREDENTIALS_FILE}`) || (info.isDirectory && p.endsWith("/credentials"))
    );
  }

  /** UIDs of the pods of the driver's namespace (node plugins, controller). */
  async #driverPodUids(): Promise<Set<string>> {
    return new Set(
      (await this.client.list<Pod>(PODS, { namespace: DRIVER_NAMESPACE })).items.map((p) =>
        p.metadata.uid
      ),
    );
  }

  override get containerCgroups(): boolean {
    return true;
  }

  /** Mountpoint Pod `name`'s container (containerd) on its node: its task's process tree. */
  async mountpointProcesses(name: string): Promise<{ container?: number; engine?: number }> {
    const found = await this.#mountpointContainer(name);
    if (!found) return {};
    const container = await taskPid(found.node, found.id).catch(() => undefined);
    if (container === undefined) return {};
    const program = (p: HostProcess) => p.cmdline.split(" ")[0]!.replace(/^.*\//, "");
    const engine = processTree(await hostProcesses(), container).find((p) =>
      /^(rclone|mount-s3)$/.test(program(p))
    );
    return { container, ...(engine ? { engine: engine.pid } : {}) };
  }

  /**
   * Each container's volume mounts as its own mount namespace sees them: through
   * `/proc/<its task's pid>/root`, so a dead mount shows although the host's target path was
   * repaired.
   */
  async workloadMountViews(pod: Pod): Promise<{ mountPath: string; view: string }[]> {
    const node = [this.node, ...this.#workers()].find((n) => n.nodeName === pod.spec?.nodeName);
    if (!node) return [];
    const csi = new Set(
      (pod.spec?.volumes ?? []).filter((v) => v.persistentVolumeClaim || v.csi).map((v) => v.name),
    );
    const views: { mountPath: string; view: string }[] = [];
    for (const c of pod.spec?.containers ?? []) {
      const mounts = (c.volumeMounts ?? []).filter((m) => csi.has(m.name));
      const id = containerIdOf(pod.status?.containerStatuses?.find((s) => s.name === c.name));
      if (!mounts.length || !id) continue;
      const pid = await taskPid(node, id).catch(() => undefined);
      if (pid === undefined) continue;
      for (const m of mounts) {
        views.push({ mountPath: m.mountPath, view: `/proc/${pid}/root${m.mountPath}` });
      }
    }
    return views;
  }

  /** SIGKILL the container's task through containerd; the kubelet restarts it. */
  async killMountpointContainer(name: string): Promise<void> {
    const found = await this.#mountpointContainer(name);
    if (!found) throw new Error(`Mountpoint Pod ${name} has no running container`);
    await killContainer(found.node, found.id);
  }

  async #mountpointContainer(
    name: string,
  ): Promise<{ node: Pick<RealNode, "containerdAddress">; id: string } | undefined> {
    const pod = await this.client.get<Pod>(PODS, name, DEFAULT_MOUNTPOINT_NAMESPACE);
    const id = containerIdOf(mountpointContainerStatus(pod));
    const nodeName = pod?.spec?.nodeName;
    const node = [this.node, ...this.#workers()].find((n) => n.nodeName === nodeName);
    return id && node ? { node, id } : undefined;
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
    for (const v of this.#views()) {
      const { prefix } = await this.#mounts(v);
      for (const uid of uids) {
        const dir = `${prefix}${DEFAULT_KUBELET_ROOT}/pods/${uid}`;
        if (await Deno.lstat(dir).then(() => true, () => false)) left.push(dir);
      }
    }
    return left;
  }

  async foreignSockets(): Promise<string[]> {
    const driver = await this.#driverPodUids();
    const pods = `${DEFAULT_KUBELET_ROOT}/pods/`;
    const sockets = await this.#podFiles((_p, info) => info.isSocket === true);
    return sockets.filter((s) => {
      const uid = s.slice(s.indexOf(pods) + pods.length).split("/")[0] ?? "";
      return !driver.has(uid);
    });
  }

  /** Close the API client and the S3 clients. */
  override async dispose(): Promise<void> {
    this.close();
    await this.#client.close();
  }
}
