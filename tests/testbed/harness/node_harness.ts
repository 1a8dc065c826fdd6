/**
 * Harness of the node-plugin process tests: an API emulator with the S3PA CRD, a temporary
 * kubelet root, the node plugin process, Mountpoint Pods played by the real mounter binary
 * running as uid 1000 (setpriv) on `<root>/pods/<uid>/volumes/kubernetes.io~empty-dir/comm`, a
 * CSI client, and an S3 client on a real S3 server:
 *
 * - `s3: "rgw"` (default): the Ceph RGW of `tests/testbed/services/s3/rgw_start.sh`; the node's
 *   default engine is `rclone mount2` (Mountpoint's writes fail on RGW 16.2: empty ETag of
 *   CompleteMultipartUpload), so volumes allow deletes and overwrites;
 * - `s3: "versitygw"`: a private versitygw per harness (`tests/testbed/services/versitygw/`,
 *   HTTP, or HTTPS with a private CA), and our `mount-s3` (`scripts/build_engine.sh`, or
 *   `S3CSI_ENGINE_BIN`) as the default engine, on the mounters' PATH.
 *
 * The mounter runs from this checkout as uid 1000: every directory down to it must be readable
 * by others (a clone under /root is not; run from a copy under /var/tmp), else the tests skip.
 *
 * @module
 */
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { emptyAndDeleteBucket } from "./s3_cleanup.ts";
import { type ApiServer, startApiServer } from "../apiserver/api_server.ts";
import {
  type MountpointS3PodAttachment,
  s3paCrd,
  type S3paSpec,
} from "../../../src/api/mountpoint_s3_pod_attachment.ts";
import { API_VERSION } from "../../../src/api/group_version.ts";
import { connectCsi, type CsiClient } from "../../../src/csi/client.ts";
import type { NodePublishVolumeRequest } from "../../../src/csi/gen/csi_types.ts";
import type { KubeClient, KubeObject } from "../../../src/kube/client.ts";
import type { Pod } from "../../../src/kube/types.ts";
import { loadKubeConfig } from "../../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../../src/kube/rest_client.ts";
import { NAMESPACES, NODES, PODS, type Resource } from "../../../src/kube/resources.ts";
import { S3PAS } from "../../../src/api/mountpoint_s3_pod_attachment.ts";
import { TAINT_AGENT_NOT_READY } from "../../../src/mppod/labels.ts";
import {
  DEFAULT_MOUNTPOINT_COMMAND,
  DEFAULT_MOUNTPOINT_IMAGE,
  mountpointPod,
  type MountpointPodConfig,
} from "../../../src/mppod/pod_spec.ts";
import { DRIVER_VERSION } from "../../../src/util/version.ts";
import { hostCommDir } from "../../../src/mppod/paths.ts";
import {
  ANNOTATION_MOUNT_PROTOCOLS,
  formatProtocols,
  OUR_PROTOCOLS,
} from "../../../src/mppod/mount_protocol.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { unmountAllUnder } from "./sys_helpers.ts";
import {
  ENTRYPOINTS,
  type Running,
  spawn,
  spawnBinary,
  testOrSkip,
  waitFor,
} from "../../_helpers.ts";
import { startTcpProxy, type TcpProxy } from "./tcp_proxy.ts";
import { engineBin, s3Client, type Server, startVersitygw, versitygwReason } from "./engine.ts";
import type { Engine } from "../../../src/mppod/mount_message.ts";
import { CACHE_DIR, CACHE_VOLUME_NAME } from "../../../src/mppod/cache_volume.ts";

/** Node name used by the harness. */
export const NODE = "node-1";
/** uid/gid of Mountpoint Pods. */
export const MP_UID = 1000;

/**
 * The controller's Mountpoint Pod settings in the node tiers: the node plugin's defaults (image,
 * command, uid {@link MP_UID}), so the pods pass its check (`src/node/pod_invariants.ts`).
 */
export const MP_POD_CONFIG: MountpointPodConfig = {
  namespace: "mount-s3",
  image: DEFAULT_MOUNTPOINT_IMAGE,
  imagePullPolicy: "IfNotPresent",
  command: DEFAULT_MOUNTPOINT_COMMAND,
  driverVersion: DRIVER_VERSION,
  mountpointVersion: "",
  priorityClassName: "",
  uid: MP_UID,
  terminationGraceSeconds: 600,
  extraLabels: {},
  cpuRequest: "",
  memoryRequest: "",
  memoryLimit: "",
  caConfigMap: "",
};

/**
 * A Mountpoint Pod object of the node tiers as the controller renders it (`mount-s3` namespace,
 * uid/gid/fsGroup {@link MP_UID}), on this node, with these volumes instead of the rendered ones of
 * the same name (and added when new); the harness plays its kubelet.
 */
export function mountpointPodObject(
  name: string,
  volumes: Record<string, unknown>[],
  protocols = formatProtocols(OUR_PROTOCOLS),
): KubeObject {
  const pod = mountpointPod(MP_POD_CONFIG, {
    name,
    attachmentName: `s3pa-${name}`,
    spec: {
      nodeName: NODE,
      persistentVolumeName: name,
      volumeID: name,
      mountOptions: "",
      workloadFSGroup: "",
      authenticationSource: "driver",
    },
    volumeAttributes: {},
  });
  const byName = new Map<string, Record<string, unknown>>(
    (pod.spec.volumes ?? []).map((v) => [v.name, v]),
  );
  for (const v of volumes) byName.set(String(v.name), v);
  const mounts = pod.spec.containers[0]!.volumeMounts ?? [];
  if (byName.has(CACHE_VOLUME_NAME) && !mounts.some((m) => m.name === CACHE_VOLUME_NAME)) {
    mounts.push({ name: CACHE_VOLUME_NAME, mountPath: CACHE_DIR });
  }
  return {
    ...pod,
    // As the controller annotates the pods it makes: the protocols its image speaks.
    metadata: {
      ...pod.metadata,
      annotations: { ...pod.metadata.annotations, [ANNOTATION_MOUNT_PROTOCOLS]: protocols },
    },
    spec: { ...pod.spec, nodeName: NODE, volumes: [...byName.values()] },
  } as KubeObject;
}
/** RGW env files tried in order: `$S3_STATE_DIR/env`, then the default state dir. */
const RGW_ENVS = [
  ...(Deno.env.get("S3_STATE_DIR") ? [`${Deno.env.get("S3_STATE_DIR")}/env`] : []),
  "/var/tmp/s3csi-rgw/env",
];

const CRDS: Resource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
};

function commandExists(name: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** The RGW environment, or undefined when RGW is not running. */
export function rgwEnv(): Record<string, string> | undefined {
  for (const path of RGW_ENVS) {
    try {
      const text = Deno.readTextFileSync(path);
      const env: Record<string, string> = {};
      for (const line of text.split("\n")) {
        const m = /^(?:export\s+)?([A-Z0-9_]+)=["']?(.*?)["']?$/.exec(line.trim());
        if (m) env[m[1]!] = m[2]!;
      }
      if (env.S3_ENDPOINT && env.AWS_ACCESS_KEY_ID) return env;
    } catch {
      // next
    }
  }
  return undefined;
}

/** The S3 server of a harness. */
export type S3Choice = "rgw" | "versitygw";

/** The default engine of a harness on `s3` (see the module doc). */
export function defaultEngineOf(s3: S3Choice, engine?: Engine): Engine {
  return engine ?? (s3 === "rgw" ? "rclone" : "mount-s3");
}

let checkoutReadable: boolean | undefined;

/** Why the process tests cannot run here (with these harness options). */
export function skipReason(
  options: { s3?: S3Choice; defaultEngine?: Engine } = {},
): string | undefined {
  const s3 = options.s3 ?? "rgw";
  if (Deno.uid() !== 0) return "needs root";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  if (!commandExists("setpriv")) return "needs setpriv (util-linux)";
  checkoutReadable ??= readableByOthersSync(ENTRYPOINTS.mounter);
  if (!checkoutReadable) {
    return `the mounter runs as uid ${MP_UID} from this checkout, which that user cannot read (${ENTRYPOINTS.mounter}): run the tests from a copy others can read, e.g. git worktree add /var/tmp/<name>`;
  }
  const engine = defaultEngineOf(s3, options.defaultEngine);
  if (engine === "rclone" && !commandExists("rclone")) {
    return "needs rclone (apt-get install rclone)";
  }
  // Every mounter execs s3-csi-supervisor, built with mount-s3: needed whatever the engine.
  if (engineBin().reason) return engineBin().reason;
  if (s3 === "versitygw") return versitygwReason();
  if (!rgwEnv()) {
    return `needs RGW: run tests/testbed/services/s3/rgw_start.sh (no env file in ${
      RGW_ENVS.join(", ")
    })`;
  }
  return undefined;
}

function readableByOthersSync(path: string): boolean {
  try {
    if ((Deno.statSync(path).mode! & 0o004) === 0) return false;
    for (let dir = path.replace(/\/[^/]*$/, ""); dir; dir = dir.replace(/\/[^/]*$/, "")) {
      if ((Deno.statSync(dir).mode! & 0o001) === 0) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** `Deno.test` skipped with a printed reason. */
export function nodeTest(
  name: string,
  fn: (t: Deno.TestContext) => Promise<void>,
  options: { s3?: S3Choice; defaultEngine?: Engine } = {},
): void {
  testOrSkip(skipReason(options), { name, sanitizeResources: false, sanitizeOps: false, fn });
}

/** The environment the mounter runs with in tests (a Mountpoint Pod's is as small). */
export const MOUNTER_ENV: Record<string, string> = {
  PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
  HOME: "/tmp",
};

/** The mounter's work dir beside its comm dir (the Mountpoint Pod's `work` emptyDir). */
export function workDirOf(commDir: string): string {
  return commDir.replace(/\/comm$/, "/work");
}

/** Create the mounter's work dir beside `commDir` (owned by uid 1000) unless it exists. */
export function ensureWorkDir(commDir: string): void {
  const dir = workDirOf(commDir);
  Deno.mkdirSync(dir, { recursive: true, mode: 0o770 });
  Deno.chownSync(dir, MP_UID, MP_UID);
}

/**
 * The mounters' environment as a Mountpoint image gives it: our build dir first on PATH, with
 * `s3-csi-supervisor` (every mounter execs into it) and, unless `rcloneOnly`, `mount-s3` — an
 * rclone-only image gets a dir holding the supervisor alone.
 */
export function mounterEnvWithEngine(rcloneOnly = false): Record<string, string> {
  const { bin, supervisor } = engineBin();
  if (!bin || !supervisor) return MOUNTER_ENV;
  const dir = rcloneOnly ? supervisorOnlyDir(supervisor) : bin.replace(/\/[^/]+$/, "");
  return { ...MOUNTER_ENV, PATH: `${dir}:${MOUNTER_ENV.PATH}` };
}

let supervisorOnly: string | undefined;

/** A dir (readable by the Mountpoint Pod's user) with only a link to the supervisor. */
function supervisorOnlyDir(supervisor: string): string {
  if (supervisorOnly) return supervisorOnly;
  const dir = Deno.makeTempDirSync({ prefix: "s3csi-rclone-image-" });
  Deno.chmodSync(dir, 0o755);
  Deno.symlinkSync(supervisor, `${dir}/s3-csi-supervisor`);
  addEventListener("unload", () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch { /* gone */ }
  });
  return supervisorOnly = dir;
}

/** `setpriv` arguments that run the mounter binary as uid 1000 on `commDir`. */
export function mounterArgs(commDir: string, extraArgs: string[] = []): string[] {
  return [
    `--reuid=${MP_UID}`,
    `--regid=${MP_UID}`,
    "--clear-groups",
    Deno.execPath(),
    "run",
    "-A",
    "--quiet",
    ENTRYPOINTS.mounter,
    `--comm-dir=${commDir}`,
    `--work-dir=${workDirOf(commDir)}`,
    "--log-format=text",
    ...extraArgs,
  ];
}

/** Start the mounter binary as uid 1000 on `commDir`. */
export function startMounter(
  commDir: string,
  extraArgs: string[] = [],
  env: Record<string, string> = mounterEnvWithEngine(),
): Running {
  ensureWorkDir(commDir);
  return spawn("setpriv", mounterArgs(commDir, extraArgs), { env });
}

/** A Mountpoint Pod: API object + comm dir + mounter process. */
export interface MpPod {
  readonly name: string;
  readonly uid: string;
  readonly commDir: string;
  /** Host path of its cache volume (an emptyDir), when it has one. */
  readonly cacheDir?: string;
  mounter: Running;
}

/** Options of {@link Harness.mountpointPod}. */
export interface MpPodOptions {
  /** Start something else than the real mounter. */
  readonly mounter?: (commDir: string) => Running;
  /**
   * A cache volume (emptyDir `cache`, with this spec) on the pod object and its directory, named
   * to the mounter by `--cache-dir` (as the controller's pod spec does with MOUNTER_CACHE_DIR).
   */
  readonly cache?: { sizeLimit?: string; medium?: "Memory" };
  /** A custom CA (PEM file on the host) the mounter hands the engine (`--ca-bundle`). */
  readonly caBundle?: string;
  /** More mounter flags. */
  readonly mounterArgs?: string[];
  /** The mount protocols its image speaks (annotation); default: this build's. */
  readonly protocols?: string | undefined;
  /** Change the pod object before it is created (a pod someone else made under that name). */
  readonly edit?: (pod: Pod) => void;
}

/** Everything a node test needs. */
export interface Harness extends AsyncDisposable {
  readonly api: ApiServer;
  readonly kube: KubeClient;
  readonly root: string;
  /** The node plugin process (replaced by {@link restartNode}). */
  readonly node: Running;
  /** Stop the node plugin (mounts stay) and start a new one. */
  restartNode(
    between?: () => Promise<void>,
    options?: { until?: "ready" | "serving" },
  ): Promise<void>;
  readonly csi: CsiClient;
  readonly s3: S3Client;
  /** The S3 server's env (`S3_ENDPOINT`, keys, …), whichever server it is. */
  readonly rgw: Record<string, string>;
  /** The S3 server. */
  readonly s3Server: S3Choice;
  /** The node plugin's default engine. */
  readonly defaultEngine: Engine;
  /** PEM file of the private CA of an HTTPS versitygw. */
  readonly caFile: string | undefined;
  readonly bucket: string;
  readonly mpPods: MpPod[];
  /** Create a Running Mountpoint Pod and start its mounter (the real one, or `options.mounter`). */
  mountpointPod(name: string, options?: MpPodOptions): Promise<MpPod>;
  /** Restart the mounter of a pod (kubelet restarting the container). */
  restartMounter(pod: MpPod): Promise<void>;
  /** Create or update the S3PA assigning `workloads` to `mpPod` (`spec`: more key fields). */
  assign(
    pv: string,
    volumeId: string,
    mpPod: string,
    workloads: string[],
    spec?: Partial<S3paSpec>,
  ): Promise<void>;
  /** Target path of a workload pod. */
  target(podUID: string, pv: string): string;
  /** A publish request. */
  publishRequest(
    podUID: string,
    pv: string,
    more?: Partial<NodePublishVolumeRequest>,
  ): NodePublishVolumeRequest;
  /** Our mounts (under the kubelet root). */
  ourMounts(): Promise<string[]>;
  /** The proxy in front of the API as the node plugin sees it (with `apiProxy`). */
  readonly apiProxy: TcpProxy | undefined;
}

/** Options of {@link startHarness}. */
export interface HarnessOptions {
  /** Extra node plugin flags. */
  readonly nodeArgs?: string[];
  /** Bucket to create (a fresh one per harness by default). */
  readonly bucket?: string;
  /** Put a switchable TCP proxy between the node plugin and the API ({@link Harness.apiProxy}). */
  readonly apiProxy?: boolean;
  /** S3 server. @default "rgw" */
  readonly s3?: S3Choice;
  /** With versitygw: HTTPS with a private CA ({@link Harness.caFile}). */
  readonly tls?: boolean;
  /** The node plugin's `--default-engine`. @default rclone on RGW, mount-s3 on versitygw */
  readonly defaultEngine?: Engine;
  /** More environment of the node plugin (e.g. proxy variables). */
  readonly nodeEnv?: Record<string, string>;
  /** With `s3: "rgw"`: the env of an RGW of the test's own (else the shared test RGW's). */
  readonly rgwEnv?: Record<string, string>;
}

/** Start everything. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const s3Choice = options.s3 ?? "rgw";
  const defaultEngine = defaultEngineOf(s3Choice, options.defaultEngine);
  let vgw: Server | undefined;
  if (s3Choice === "versitygw") vgw = await startVersitygw({ tls: options.tls === true });
  const rgw = vgw ? vgw.env : options.rgwEnv ?? rgwEnv()!;
  const mounterEnv = mounterEnvWithEngine(defaultEngine !== "mount-s3");
  const api = await startApiServer({ port: 0 });
  const kube = new RestKubeClient(
    loadKubeConfig((n) => (n === "KUBECONFIG" ? api.kubeconfigPath : undefined)).config,
  );
  await kube.create(CRDS, s3paCrd() as KubeObject);
  await waitFor("the S3PA CRD", () => kube.list(S3PAS).then(() => true, () => false));
  for (const ns of ["mount-s3", "default"]) {
    await kube.create(NAMESPACES, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } })
      .catch((e) => {
        if (e?.name !== "AlreadyExistsError") throw e;
      });
  }
  await kube.create(NODES, {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: NODE },
    spec: { taints: [{ key: TAINT_AGENT_NOT_READY, effect: "NoExecute" }] },
  });
  const root = await Deno.makeTempDir({ dir: "/tmp", prefix: "k" });
  await Deno.chmod(root, 0o755);
  const s3: S3Client & { closeAll?(): void } = vgw ? await s3Client(vgw) : new S3Client({
    endpoint: rgw.S3_ENDPOINT!,
    region: rgw.AWS_REGION ?? "us-east-1",
    forcePathStyle: true,
    credentials: {
      accessKeyId: rgw.AWS_ACCESS_KEY_ID!,
      secretAccessKey: rgw.AWS_SECRET_ACCESS_KEY!,
    },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const bucket = options.bucket ?? `node-test-${crypto.randomUUID().slice(0, 8)}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }), {
    abortSignal: AbortSignal.timeout(30_000),
  }).catch((e) => {
    if (e?.name !== "BucketAlreadyOwnedByYou") {
      throw new Error(
        `${s3Choice} at ${rgw.S3_ENDPOINT} cannot create bucket ${bucket} (full OSD?): ${e}`,
      );
    }
  });
  const sock = `${root}/csi.sock`;
  const apiUrl = new URL(api.url);
  const apiProxy = options.apiProxy
    ? startTcpProxy({ hostname: apiUrl.hostname, port: Number(apiUrl.port) })
    : undefined;
  let nodeKubeconfig = api.kubeconfigPath;
  if (apiProxy) {
    nodeKubeconfig = `${root}.node.kubeconfig`;
    const text = await Deno.readTextFile(api.kubeconfigPath);
    await Deno.writeTextFile(
      nodeKubeconfig,
      text.replaceAll(api.url, `http://127.0.0.1:${apiProxy.port}`),
    );
  }
  /** Start the node plugin; `until`: "ready" (caches synced) or "serving" (socket served). */
  const startNode = async (until: "ready" | "serving" = "ready") => {
    const proc = spawnBinary("node", [
      `--node-id=${NODE}`,
      `--kubelet-path=${root}`,
      `--endpoint=unix://${sock}`,
      "--log-format=text",
      "--attachment-timeout=20s",
      "--mount-timeout=20s",
      `--default-engine=${defaultEngine}`,
      ...(options.nodeArgs ?? []),
    ], {
      KUBECONFIG: nodeKubeconfig,
      AWS_ACCESS_KEY_ID: rgw.AWS_ACCESS_KEY_ID!,
      AWS_SECRET_ACCESS_KEY: rgw.AWS_SECRET_ACCESS_KEY!,
      AWS_ENDPOINT_URL: rgw.S3_ENDPOINT!,
      AWS_REGION: rgw.AWS_REGION ?? "us-east-1",
      // As the deploy does with tls.caCertConfigMap: the node's own bucket check trusts the CA.
      ...(vgw?.caFile ? { AWS_CA_BUNDLE: vgw.caFile, DENO_CERT: vgw.caFile } : {}),
      ...(options.nodeEnv ?? {}),
    });
    await waitFor("the node plugin to be ready", () => {
      if (proc.stderr().includes("error:")) throw new Error(`node plugin failed: ${proc.stderr()}`);
      return proc.stderr().includes(until === "ready" ? "Node plugin ready" : "Serving CSI");
    }, { timeoutMs: 60_000 });
    return proc;
  };
  let node = await startNode();
  let csi = connectCsi(sock, { timeoutMs: 60_000 });
  const mpPods: MpPod[] = [];
  /** How each pod's mounter is started again (the same flags and environment). */
  const restarts = new Map<MpPod, () => Running>();

  const h: Harness = {
    api,
    kube,
    root,
    get node() {
      return node;
    },
    async restartNode(between, restartOptions = {}) {
      // Close the channel first: a server going away under an open grpc-js channel can trip an
      // nghttp2 assertion in Deno's node:http2 (GOAWAY handling) and abort the test process.
      csi.close();
      await node.stop("SIGTERM");
      await between?.();
      node = await startNode(restartOptions.until);
      csi = connectCsi(sock, { timeoutMs: 60_000 });
    },
    get csi() {
      return csi;
    },
    s3,
    rgw,
    s3Server: s3Choice,
    defaultEngine,
    caFile: vgw?.caFile,
    bucket,
    mpPods,
    async mountpointPod(name, podOptions = {}) {
      const volumes: Record<string, unknown>[] = [{ name: "comm", emptyDir: { medium: "Memory" } }];
      if (podOptions.cache) volumes.push({ name: CACHE_VOLUME_NAME, emptyDir: podOptions.cache });
      const object = mountpointPodObject(name, volumes, podOptions.protocols);
      podOptions.edit?.(object as Pod);
      const created = await kube.create<KubeObject>(PODS, object);
      const uid = created.metadata!.uid!;
      const commDir = hostCommDir(root, uid);
      await Deno.mkdir(commDir, { recursive: true, mode: 0o755 });
      await Deno.chmod(commDir, 0o2770);
      await Deno.chown(commDir, MP_UID, MP_UID);
      ensureWorkDir(commDir);
      const extra = [...(podOptions.mounterArgs ?? [])];
      let cacheDir: string | undefined;
      if (podOptions.cache) {
        // Where the kubelet makes the emptyDir (fsGroup: group-owned, setgid).
        cacheDir = commDir.replace(/\/comm$/, `/${CACHE_VOLUME_NAME}`);
        await Deno.mkdir(cacheDir, { recursive: true });
        await Deno.chmod(cacheDir, 0o2770);
        await Deno.chown(cacheDir, 0, MP_UID);
        extra.push(`--cache-dir=${cacheDir}`);
      }
      if (podOptions.caBundle) extra.push(`--ca-bundle=${podOptions.caBundle}`);
      const start = podOptions.mounter ?? ((dir: string) => startMounter(dir, extra, mounterEnv));
      const mounter = start(commDir);
      await waitFor(
        "the mounter socket",
        () => Deno.stat(`${commDir}/mount.sock`).then(() => true, () => false),
        { timeoutMs: 60_000 },
      )
        .catch((e) => {
          throw new Error(`${e.message}; mounter log: ${mounter.stderr().slice(-2000)}`);
        });
      const fresh = await kube.get<KubeObject>(PODS, name, "mount-s3");
      await kube.update(PODS, { ...fresh!, status: { phase: "Running" } }, {
        subresource: "status",
      });
      const pod = { name, uid, commDir, mounter, ...(cacheDir ? { cacheDir } : {}) };
      mpPods.push(pod);
      restarts.set(pod, () => startMounter(commDir, extra, mounterEnv));
      return pod;
    },
    async restartMounter(pod) {
      await pod.mounter.stop("SIGKILL").catch(() => {});
      pod.mounter = (restarts.get(pod) ?? (() => startMounter(pod.commDir)))();
      const pid = pod.mounter.child.pid;
      // Its socket, or — when the node plugin held the session and handed it over at once — the
      // supervisor the mounter became (same pid).
      await waitFor(
        "the restarted mounter's socket (or its hand-over to the supervisor)",
        async () =>
          await Deno.stat(`${pod.commDir}/mount.sock`).then(() => true, () => false) ||
          (await Deno.readTextFile(`/proc/${pid}/comm`).catch(() => "")).startsWith(
            "s3-csi-superv",
          ),
        { timeoutMs: 60_000 },
      );
    },
    async assign(pv, volumeId, mpPod, workloads, more = {}) {
      const name = `s3pa-${pv}`;
      const spec = {
        nodeName: NODE,
        persistentVolumeName: pv,
        volumeID: volumeId,
        mountOptions: "",
        workloadFSGroup: "",
        authenticationSource: "driver" as const,
        ...more,
        mountpointS3PodAttachments: {
          [mpPod]: workloads.map((w) => ({
            workloadPodUID: w,
            attachmentTime: new Date().toISOString(),
          })),
        },
      };
      const existing = await kube.get<MountpointS3PodAttachment & KubeObject>(S3PAS, name);
      if (existing) await kube.update(S3PAS, { ...existing, spec });
      else {
        await kube.create(S3PAS, {
          apiVersion: API_VERSION,
          kind: "MountpointS3PodAttachment",
          metadata: { name },
          spec,
        } as KubeObject);
      }
    },
    target: (podUID, pv) => `${root}/pods/${podUID}/volumes/kubernetes.io~csi/${pv}/mount`,
    publishRequest(podUID, pv, more = {}) {
      return {
        volumeId: `vol-${pv}`,
        targetPath: h.target(podUID, pv),
        volumeCapability: {
          // rclone (the RGW harness's engine) serves only volumes allowing both.
          mount: {
            mountFlags: defaultEngine === "rclone"
              ? ["allow-delete", "allow-overwrite"]
              : ["allow-delete"],
          },
          accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
        },
        volumeContext: { bucketName: bucket, "csi.storage.k8s.io/pod.uid": podUID },
        ...more,
      };
    },
    async ourMounts() {
      return (await readMountInfo()).map((m) => m.mountPoint).filter((p) =>
        p.startsWith(`${root}/`)
      );
    },
    apiProxy,
    async [Symbol.asyncDispose]() {
      csi.close();
      await node.stop("SIGTERM").catch(() => {});
      await unmountAllUnder(root);
      for (const p of mpPods) await p.mounter.stop("SIGTERM", 5000).catch(() => {});
      await unmountAllUnder(root);
      await removeRootSafely(root);
      // The test OSD is small (10 GiB): leave no data behind.
      await emptyAndDeleteBucket(s3, bucket).catch(() => {});
      if (s3.closeAll) s3.closeAll();
      else s3.destroy();
      await apiProxy?.down();
      if (apiProxy) await Deno.remove(nodeKubeconfig).catch(() => {});
      await api.stop();
      await vgw?.[Symbol.asyncDispose]();
    },
  };
  return h;
}

/**
 * Remove the harness's kubelet root: only a `/tmp/k*` dir this harness made, and only when
 * nothing is mounted under it any more (a recursive removal must never reach a mount: a FUSE
 * mount is a bucket, a bind mount can be anything).
 */
async function removeRootSafely(root: string): Promise<void> {
  if (!/^\/tmp\/k[^/]+$/.test(root)) {
    throw new Error(`refusing to remove ${root}: not a harness root`);
  }
  const left = (await readMountInfo()).filter((m) =>
    m.mountPoint === root || m.mountPoint.startsWith(`${root}/`)
  );
  if (left.length) {
    throw new Error(
      `not removing ${root}: still mounted under it: ${left.map((m) => m.mountPoint).join(", ")}`,
    );
  }
  await Deno.remove(root, { recursive: true }).catch(() => {});
}

/** Make the kubelet's parent dir of a target (kubelet creates it, not the `mount` dir). */
export async function kubeletMkdirParent(target: string): Promise<void> {
  await Deno.mkdir(target.replace(/\/mount$/, ""), { recursive: true, mode: 0o750 });
}
