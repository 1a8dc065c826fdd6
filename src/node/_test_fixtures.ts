/**
 * Shared fixtures of the node unit tests: a fake cluster (S3PA + Mountpoint Pod), fake sys and
 * files, a fake mounter answering on the comm socket, and a publisher wired to them.
 *
 * @module
 */
import { API_VERSION } from "../api/group_version.ts";
import { FakeKubeClient } from "../kube/fake_client.ts";
import type { KubeObject } from "../kube/client.ts";
import { PODS } from "../kube/resources.ts";
import { S3PAS, type S3paSpec } from "../api/mountpoint_s3_pod_attachment.ts";
import { CUSTODY_SOCK, hostCommDir, MOUNT_ERROR, MOUNT_SOCK } from "../mppod/paths.ts";
import {
  ANNOTATION_MOUNT_PROTOCOLS,
  formatProtocols,
  type ProtocolRange,
} from "../mppod/mount_protocol.ts";
import { LABEL_DRIVER_VERSION } from "../mppod/labels.ts";
import { errorMessage } from "../util/errors.ts";
import { type MountMessage, parseMountMessage } from "../mppod/mount_message.ts";
import {
  mountpointPod,
  type MountpointPodConfig,
  type MountpointPodInvariants,
  mountpointPodInvariants,
} from "../mppod/pod_spec.ts";
import { FakeFiles } from "../sys/fake_files.ts";
import { FakeSys } from "../sys/fake_sys.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { Custody } from "./custody.ts";
import { HealthChecker } from "./health.ts";
import { NO_METRICS, type NodeMetrics } from "./metrics.ts";
import { MountpointPods } from "./mountpoint_pods.ts";
import { NodeService } from "./node_service.ts";
import { Publisher, type PublisherOptions } from "./publisher.ts";
import { Unmounter, type UnmounterOptions } from "./unmounter.ts";

/** Kubelet root of the fixtures. */
export const ROOT = "/var/lib/kubelet";
/** Node name. */
export const NODE = "node-1";

/** The fake world. */
export interface World extends AsyncDisposable {
  kube: FakeKubeClient;
  sys: FakeSys;
  files: FakeFiles;
  pods: MountpointPods;
  locks: KeyedMutex;
  health: HealthChecker;
  custody: Custody;
  publisher: Publisher;
  /** An Unmounter on this world (its sys, files, pods, locks and health; fast polling). */
  unmounter(more?: Partial<UnmounterOptions>): Unmounter;
  /** A NodeService on this world. */
  service(metrics?: NodeMetrics): NodeService;
  /** Messages the fake mounters received, by pod name. */
  received: Map<string, MountMessage[]>;
  /**
   * A Mountpoint Pod with a fake mounter on its comm dir. `sessions`: its image speaks mount
   * protocol 2 (annotated as the controller does) and its mounter behaves as the real one after a
   * hand-over: the socket goes (it became the supervisor) until {@link World.restartMounter}.
   */
  addMountpointPod(
    name: string,
    phase?: string,
    options?: { sessions?: boolean; protocols?: ProtocolRange; driverVersion?: string },
  ): Promise<string>;
  /**
   * The Mountpoint container of `name` restarted: a new mounter listens again; with `refuse`, it
   * refuses what it gets (writes that `mount.error`).
   */
  restartMounter(name: string, options?: { refuse?: string }): void;
  /** An S3PA assigning `workloads` to `mpPod` for `pv` (`spec` adds or overrides key fields). */
  assign(
    pv: string,
    mpPod: string,
    workloads: string[],
    spec?: Partial<S3paSpec>,
  ): Promise<void>;
  target(uid: string, pv: string): string;
  /**
   * The common start: Mountpoint Pod `mp-1` running, PV `pv-1` assigned to it for workload
   * `uid-a`; resolves with that workload's target of `pv-1`.
   */
  attachOne(): Promise<string>;
}

/** The controller's Mountpoint Pod settings in the unit tests. */
export const POD_CONFIG: MountpointPodConfig = {
  namespace: "mount-s3",
  image: "s3-csi-mounter:test",
  imagePullPolicy: "IfNotPresent",
  command: "/bin/s3-csi-mounter",
  driverVersion: "0.0.0-test",
  mountpointVersion: "",
  priorityClassName: "",
  uid: 1000,
  terminationGraceSeconds: 600,
  extraLabels: {},
  cpuRequest: "",
  memoryRequest: "",
  memoryLimit: "",
  caConfigMap: "",
};
/** What the node plugin expects of Mountpoint Pods in the unit tests. */
export const POD_INVARIANTS: MountpointPodInvariants = mountpointPodInvariants(POD_CONFIG);

/** A Mountpoint Pod object as the controller renders it, on this node, in `phase`. */
export function mountpointPodObject(name: string, phase = "Running"): KubeObject {
  const pod = mountpointPod(POD_CONFIG, {
    name,
    attachmentName: `s3pa-${name}`,
    spec: {
      nodeName: NODE,
      persistentVolumeName: "pv-1",
      volumeID: "vol-pv-1",
      mountOptions: "",
      workloadFSGroup: "",
      authenticationSource: "driver",
    },
    volumeAttributes: {},
  });
  return { ...pod, spec: { ...pod.spec, nodeName: NODE }, status: { phase } } as KubeObject;
}

const DRIVER_ENV: Record<string, string> = {
  AWS_ACCESS_KEY_ID: "AKIATEST",
  AWS_SECRET_ACCESS_KEY: "secretTEST",
};

/** Build the world. */
export async function world(more: Partial<PublisherOptions> = {}): Promise<World> {
  const kube = new FakeKubeClient();
  const sys = new FakeSys();
  const files = new FakeFiles();
  const locks = new KeyedMutex();
  const health = new HealthChecker(files, { timeoutMs: 200 });
  const pods = new MountpointPods(kube, { nodeName: NODE, namespace: "mount-s3" });
  const stop = new AbortController();
  const running = pods.run(stop.signal);
  await pods.waitForSync(1000);
  const received = new Map<string, MountMessage[]>();
  const comms = new Map<string, string>();
  const custodyServed = new Set<string>();
  const serveCustody = async (comm: string, fd: number, session: string) => {
    const listener = await sys.listenUnix(`${comm}/${CUSTODY_SOCK}`);
    files.plant(`${comm}/${CUSTODY_SOCK}`, { kind: "socket" });
    while (!stop.signal.aborted) {
      const conn = await sys.accept(listener, { timeoutMs: 60_000, signal: stop.signal })
        .catch(() => undefined);
      if (!conn) return;
      const bytes = new TextEncoder().encode(JSON.stringify({ session }));
      await sys.sendWithFd(conn, bytes, fd, { timeoutMs: 1000 }).catch(() => {});
      conn.close();
    }
  };
  const refusing = new Map<string, string>();
  const serving: Promise<void>[] = [];
  // What the Publisher and the Unmounter share, as run_node.ts wires them.
  const custody = new Custody({
    sys,
    files,
    kubeletRoot: ROOT,
    locks,
    pods,
    pollMs: 5,
    answerMs: 300,
    refusalPauseMs: 20,
    givenUpPollMs: 0,
  });
  const shared = { sys, files, pods, locks, health, custody, kubeletRoot: ROOT };
  const publisher = new Publisher({
    ...shared,
    env: (n) => DRIVER_ENV[n],
    endpoint: "http://s3.local:9000",
    region: "us-east-1",
    readAheadKb: 1024,
    mountpointPod: POD_INVARIANTS,
    timeouts: { attachmentMs: 300, podRunningMs: 300, connectMs: 300, readyMs: 300 },
    ...more,
  });
  const w: World = {
    kube,
    sys,
    files,
    pods,
    locks,
    health,
    custody,
    publisher,
    unmounter: (more = {}) =>
      new Unmounter({
        ...shared,
        inUseWaitMs: 50,
        pollMs: 5,
        ...more,
      }),
    service: (metrics = NO_METRICS) =>
      new NodeService({
        nodeId: NODE,
        kubeletRoot: ROOT,
        publisher,
        sys,
        files,
        pods,
        health,
        metrics,
      }),
    received,
    async addMountpointPod(name, phase = "Running", options = {}) {
      const object = mountpointPodObject(name, phase);
      // A pod of an image before mount protocol 2 carries no protocols annotation; `protocols`: a
      // pod of another release, whose mounter speaks that range.
      if (options.protocols) {
        object.metadata!.annotations![ANNOTATION_MOUNT_PROTOCOLS] = formatProtocols(
          options.protocols,
        );
      } else if (!options.sessions) {
        delete object.metadata!.annotations![ANNOTATION_MOUNT_PROTOCOLS];
      }
      if (options.driverVersion) {
        object.metadata!.labels![LABEL_DRIVER_VERSION] = options.driverVersion;
      }
      const pod = await kube.create<KubeObject>(PODS, object);
      const uid = pod.metadata!.uid!;
      const comm = hostCommDir(ROOT, uid);
      files.addDir(comm);
      const listener = await sys.listenUnix(`${comm}/${MOUNT_SOCK}`);
      files.plant(`${comm}/${MOUNT_SOCK}`, { kind: "socket" });
      // A fake mounter: accept connections and record messages until disposed.
      serving.push((async () => {
        while (!stop.signal.aborted) {
          const conn = await sys.accept(listener, { timeoutMs: 60_000, signal: stop.signal })
            .catch(() => undefined);
          if (!conn) return;
          const msg = await sys.receiveWithFds(conn, { maxBytes: 65536, timeoutMs: 1000 });
          let message: MountMessage;
          try {
            message = parseMountMessage(msg.bytes, options.protocols);
          } catch (err) {
            // As the mounter does: the reason in mount.error, nothing served.
            await files.writeFile(`${comm}/${MOUNT_ERROR}`, errorMessage(err));
            continue;
          }
          const list = received.get(name) ?? [];
          list.push(message);
          received.set(name, list);
          const refuse = refusing.get(name);
          if (refuse !== undefined) {
            await files.writeFile(`${comm}/${MOUNT_ERROR}`, refuse);
          } else if (options.sessions || (options.protocols?.max ?? 1) >= 2) {
            await files.remove(`${comm}/${MOUNT_SOCK}`);
            // The supervisor it became hands the fd back to a root peer on custody.sock.
            if (message.session && !custodyServed.has(name)) {
              custodyServed.add(name);
              serving.push(serveCustody(comm, msg.fds[0]!, message.session.id));
            }
          }
        }
      })());
      comms.set(name, comm);
      return uid;
    },
    restartMounter(name, options = {}) {
      const comm = comms.get(name)!;
      files.plant(`${comm}/${MOUNT_SOCK}`, { kind: "socket" });
      if (options.refuse === undefined) refusing.delete(name);
      else refusing.set(name, options.refuse);
    },
    async assign(pv, mpPod, workloads, more = {}) {
      await kube.create(S3PAS, {
        apiVersion: API_VERSION,
        kind: "MountpointS3PodAttachment",
        metadata: { name: `s3pa-${pv}-${mpPod}` },
        spec: {
          nodeName: NODE,
          persistentVolumeName: pv,
          volumeID: `vol-${pv}`,
          mountOptions: "",
          workloadFSGroup: "",
          authenticationSource: "driver",
          ...more,
          mountpointS3PodAttachments: {
            [mpPod]: workloads.map((w) => ({
              workloadPodUID: w,
              attachmentTime: "2026-01-01T00:00:00Z",
            })),
          },
        },
      } as KubeObject);
    },
    target: (uid, pv) => `${ROOT}/pods/${uid}/volumes/kubernetes.io~csi/${pv}/mount`,
    async attachOne() {
      await w.addMountpointPod("mp-1");
      await w.assign("pv-1", "mp-1", ["uid-a"]);
      return w.target("uid-a", "pv-1");
    },
    async [Symbol.asyncDispose]() {
      stop.abort();
      await running;
      await Promise.all(serving);
    },
  };
  return w;
}
