/**
 * Harness of the node-plugin process tests: an API emulator with the S3PA CRD, a temporary
 * kubelet root, the node plugin process, Mountpoint Pods played by the real mounter binary
 * running as uid 1000 (setpriv) on `<root>/pods/<uid>/volumes/kubernetes.io~empty-dir/comm`, a
 * CSI client, and an S3 client on the RGW from `tests/testbed/services/s3/rgw_start.sh`.
 *
 * @module
 */
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { emptyAndDeleteBucket } from "./_s3_cleanup.ts";
import { type ApiServer, startApiServer } from "../testbed/apiserver/api_server.ts";
import {
  type MountpointS3PodAttachment,
  s3paCrd,
} from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { API_VERSION } from "../../src/api/group_version.ts";
import { connectCsi, type CsiClient } from "../../src/csi/client.ts";
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { NAMESPACES, NODES, PODS, type Resource } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import {
  COMPONENT_MOUNTPOINT_POD,
  LABEL_COMPONENT,
  TAINT_AGENT_NOT_READY,
} from "../../src/mppod/labels.ts";
import { hostCommDir } from "../../src/mppod/paths.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { unmountAllUnder } from "../sys/_helpers.ts";
import { ENTRYPOINTS, type Running, spawn, spawnBinary, waitFor } from "../_helpers.ts";
import { startTcpProxy, type TcpProxy } from "./_tcp_proxy.ts";

/** Node name used by the harness. */
export const NODE = "node-1";
/** uid/gid of Mountpoint Pods. */
export const MP_UID = 1000;
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

/** Why the process tests cannot run here. */
export function skipReason(): string | undefined {
  if (Deno.uid() !== 0) return "needs root";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  if (!commandExists("rclone")) return "needs rclone (apt-get install rclone)";
  if (!commandExists("setpriv")) return "needs setpriv (util-linux)";
  if (!rgwEnv()) {
    return `needs RGW: run tests/testbed/services/s3/rgw_start.sh (no env file in ${
      RGW_ENVS.join(", ")
    })`;
  }
  return undefined;
}

/** `Deno.test` skipped with a printed reason. */
export function nodeTest(name: string, fn: (t: Deno.TestContext) => Promise<void>): void {
  const reason = skipReason();
  if (reason) Deno.stderr.writeSync(new TextEncoder().encode(`SKIP ${name}: ${reason}\n`));
  Deno.test({
    name: reason ? `${name} (skipped: ${reason})` : name,
    ignore: reason !== undefined,
    sanitizeResources: false,
    sanitizeOps: false,
    fn,
  });
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
    "--engine=rclone",
    "--log-format=text",
    ...extraArgs,
  ];
}

/** Start the mounter binary as uid 1000 on `commDir`. */
export function startMounter(commDir: string, extraArgs: string[] = []): Running {
  ensureWorkDir(commDir);
  return spawn("setpriv", mounterArgs(commDir, extraArgs), { env: MOUNTER_ENV });
}

/** A Mountpoint Pod: API object + comm dir + mounter process. */
export interface MpPod {
  readonly name: string;
  readonly uid: string;
  readonly commDir: string;
  mounter: Running;
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
  readonly rgw: Record<string, string>;
  readonly bucket: string;
  readonly mpPods: MpPod[];
  /** Create a Running Mountpoint Pod and start its mounter (the real one, or `options.mounter`). */
  mountpointPod(name: string, options?: { mounter?: (commDir: string) => Running }): Promise<MpPod>;
  /** Restart the mounter of a pod (kubelet restarting the container). */
  restartMounter(pod: MpPod): Promise<void>;
  /** Create or update the S3PA assigning `workloads` to `mpPod`. */
  assign(pv: string, volumeId: string, mpPod: string, workloads: string[]): Promise<void>;
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
}

/** Start everything. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const rgw = rgwEnv()!;
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
  const s3 = new S3Client({
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
      throw new Error(`RGW at ${rgw.S3_ENDPOINT} cannot create bucket ${bucket} (full OSD?): ${e}`);
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
      ...(options.nodeArgs ?? []),
    ], {
      KUBECONFIG: nodeKubeconfig,
      AWS_ACCESS_KEY_ID: rgw.AWS_ACCESS_KEY_ID!,
      AWS_SECRET_ACCESS_KEY: rgw.AWS_SECRET_ACCESS_KEY!,
      AWS_ENDPOINT_URL: rgw.S3_ENDPOINT!,
      AWS_REGION: rgw.AWS_REGION ?? "us-east-1",
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
    bucket,
    mpPods,
    async mountpointPod(name, podOptions = {}) {
      const created = await kube.create<KubeObject>(PODS, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name,
          namespace: "mount-s3",
          labels: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
        },
        spec: {
          nodeName: NODE,
          restartPolicy: "OnFailure",
          securityContext: { runAsUser: MP_UID, runAsGroup: MP_UID, fsGroup: MP_UID },
          containers: [{ name: "mountpoint", image: "s3-csi-mounter" }],
          volumes: [{ name: "comm", emptyDir: { medium: "Memory" } }],
        },
      });
      const uid = created.metadata!.uid!;
      const commDir = hostCommDir(root, uid);
      await Deno.mkdir(commDir, { recursive: true, mode: 0o755 });
      await Deno.chmod(commDir, 0o2770);
      await Deno.chown(commDir, MP_UID, MP_UID);
      ensureWorkDir(commDir);
      const mounter = (podOptions.mounter ?? startMounter)(commDir);
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
      const pod = { name, uid, commDir, mounter };
      mpPods.push(pod);
      return pod;
    },
    async restartMounter(pod) {
      await pod.mounter.stop("SIGKILL").catch(() => {});
      pod.mounter = startMounter(pod.commDir);
      await waitFor(
        "the restarted mounter socket",
        () => Deno.stat(`${pod.commDir}/mount.sock`).then(() => true, () => false),
        {
          timeoutMs: 60_000,
        },
      );
    },
    async assign(pv, volumeId, mpPod, workloads) {
      const name = `s3pa-${pv}`;
      const spec = {
        nodeName: NODE,
        persistentVolumeName: pv,
        volumeID: volumeId,
        mountOptions: "",
        workloadFSGroup: "",
        authenticationSource: "driver" as const,
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
          mount: { mountFlags: ["allow-delete"] },
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
      await Deno.remove(root, { recursive: true }).catch(() => {});
      // The test OSD is small (10 GiB): leave no data behind.
      await emptyAndDeleteBucket(s3, bucket).catch(() => {});
      s3.destroy();
      await apiProxy?.down();
      if (apiProxy) await Deno.remove(nodeKubeconfig).catch(() => {});
      await api.stop();
    },
  };
  return h;
}

/** Make the kubelet's parent dir of a target (kubelet creates it, not the `mount` dir). */
export async function kubeletMkdirParent(target: string): Promise<void> {
  await Deno.mkdir(target.replace(/\/mount$/, ""), { recursive: true, mode: 0o750 });
}
