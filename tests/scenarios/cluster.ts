/**
 * What the end-to-end scenarios (`tests/scenarios/*.ts`) need from a cluster, and the operations
 * they share: buckets and objects in S3, Secrets, static volumes, workload pods, events, logs,
 * Mountpoint Pods and S3PAs. Two tiers implement it:
 *
 * - `tests/testbed/harness/e2e_cluster.ts`: the sandbox (API emulator or the real kube-apiserver,
 *   kubelet emulators, node plugin processes) — the e2e tier and `deno task sandbox`;
 * - `tests/testbed/services/real_node/cluster.ts`: a real kubelet + containerd node with the
 *   driver deployed by `deno task deploy` — the real-node tier and `deno task sandbox --real-node`.
 *
 * What differs between them (where container logs are, which mounts and processes belong to the
 * cluster, the workload image) is abstract here; everything else is written once.
 *
 * @module
 */
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import type { Resource } from "../../src/kube/resources.ts";
import { ConflictError } from "../../src/kube/errors.ts";
import { DEPLOYMENTS, EVENTS, NODES, PODS, PVCS, PVS, SECRETS } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { ContainerStatus, Pod } from "../testbed/kubelet/k8s_types.ts";
import {
  COMPONENT_MOUNTPOINT_POD,
  DEFAULT_MOUNTPOINT_NAMESPACE,
  LABEL_COMPONENT,
} from "../../src/mppod/labels.ts";
import { MOUNTPOINT_CONTAINER } from "../../src/mppod/pod_spec.ts";
import { type MountInfo, readMountInfo } from "../../src/sys/mountinfo.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import { kubectl, type KubectlResult, runToEnd, waitFor } from "../_helpers.ts";
import { createBucketFor } from "../testbed/services/versitygw/admin.ts";

/** S3 settings as the RGW scripts print them (main user, and the second user's keys). */
export interface ScenarioS3Env {
  readonly S3_ENDPOINT: string;
  readonly AWS_ACCESS_KEY_ID: string;
  readonly AWS_SECRET_ACCESS_KEY: string;
  readonly AWS_REGION: string;
  readonly S3_OTHER_ACCESS_KEY_ID?: string;
  readonly S3_OTHER_SECRET_ACCESS_KEY?: string;
  /** `rgw`, `versitygw`, `s3rver`. */
  readonly S3_SERVER?: string;
}

/** The status of a Mountpoint Pod's container (undefined before it has one). */
export function mountpointContainerStatus(pod: Pod | undefined): ContainerStatus | undefined {
  return pod?.status?.containerStatuses?.find((c) => c.name === MOUNTPOINT_CONTAINER);
}

/** A short random suffix for unique names. */
export function unique(): string {
  return crypto.randomUUID().slice(0, 8);
}

/**
 * Runs one named sub-step (`t.step` in a test, a reported step in the sandbox). A step may return
 * a one-line detail of what it measured (shown by the sandbox and the real-node tier's report).
 */
export type Step = (
  name: string,
  fn: () => void | string | Promise<void | string>,
) => Promise<unknown>;

/**
 * Thrown by a step that cannot run on this cluster for a reason it found out (e.g. an S3 server
 * without an API the step needs): the sandbox reports the step as skipped with the message; a
 * tier's `t.step` fails with it.
 */
export class ScenarioSkipped extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ScenarioSkipped";
  }
}

/** One end-to-end scenario: a name and steps run against any {@link ScenarioCluster}. */
export interface Scenario {
  /** Test name (without the tier prefix). */
  readonly name: string;
  /** Nodes it needs at least; scenarios adapt to more. */
  readonly nodes: number;
  /**
   * Only a real kubelet, scheduler and kube-controller-manager show what it proves (eviction,
   * preemption, taint eviction): the real-node tier and `deno task sandbox --real-node` run it, the
   * emulated sandbox does not.
   */
  readonly realNodeOnly?: boolean;
  /**
   * The engine it proves something of: `mount-s3` (its session resumes after a crash; rclone's
   * cannot) needs an S3 server that accepts its writes — the e2e tier then runs it on versitygw.
   */
  readonly engine?: "mount-s3";
  /** The steps; each creates objects with unique names and deletes them again. */
  run(e: ScenarioCluster, step: Step): Promise<void>;
}

/** A volume of {@link ScenarioCluster.pod}: a claim, or an inline `csi:` volume of the driver. */
export type PodVolume = {
  readonly mountPath: string;
  /** `persistentVolumeClaim.readOnly` / `csi.readOnly` (and the mount's `readOnly`). */
  readonly readOnly?: boolean;
} & ({ readonly claim: string } | { readonly inline: InlineVolume });

/** An inline (ephemeral) volume of the driver in a pod's spec. */
export interface InlineVolume {
  /** `volumeAttributes` (`bucketName`, `mountOptions`, …). */
  readonly attributes: Record<string, string>;
  /** `nodePublishSecretRef.name` (a Secret in the pod's namespace). */
  readonly secret?: string;
}

/** Settings of {@link ScenarioCluster.pod}. */
export interface PodOptions {
  readonly name: string;
  /** `sh -c` script. */
  readonly script: string;
  readonly volumes: readonly PodVolume[];
  readonly runAsUser?: number;
  readonly runAsGroup?: number;
  /** Omitted when null. @default 1000 */
  readonly fsGroup?: number | null;
  /** @default "Never" */
  readonly restartPolicy?: "Never" | "OnFailure" | "Always";
  /** Pin to a node. */
  readonly node?: string;
  readonly env?: Record<string, string>;
  /** An emptyDir of the pod's own mounted here (scratch files; the image has no writable /tmp). */
  readonly scratch?: string;
  /** `spec.tolerations`. */
  readonly tolerations?: readonly Record<string, unknown>[];
  /** Labels of the pod. */
  readonly labels?: Record<string, string>;
  /** `spec.schedulingGates` names. */
  readonly schedulingGates?: readonly string[];
  /** Requests of container `main` (e.g. `{ cpu: "100m" }`). */
  readonly requests?: Record<string, string>;
  /** `spec.priorityClassName`. */
  readonly priorityClassName?: string;
}

/** Settings of {@link ScenarioCluster.deployment}: a pod template and a replica count. */
export type DeploymentOptions = Omit<PodOptions, "restartPolicy" | "name"> & {
  readonly name: string;
  readonly replicas: number;
};

/** A node taint. */
export interface Taint {
  readonly key: string;
  readonly value?: string;
  readonly effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

interface NodeLike extends KubeObject {
  spec?: { unschedulable?: boolean; taints?: Taint[] };
}

/** Settings of {@link ScenarioCluster.staticVolume}. */
export interface StaticVolumeOptions {
  readonly bucket: string;
  readonly mountOptions?: string[];
  readonly accessModes?: string[];
  readonly attributes?: Record<string, string>;
  /** `nodePublishSecretRef` (namespace of the workloads). */
  readonly secret?: string;
}

/** An event as the tests read it. */
export interface KubeEvent extends KubeObject {
  reason?: string;
  message?: string;
  type?: string;
  involvedObject?: { uid?: string; name?: string; kind?: string };
}

/** An S3PA as the tests read it. */
export interface S3paLike extends KubeObject {
  spec?: { mountpointS3PodAttachments?: Record<string, { workloadPodUID: string }[]> };
}

/** Where {@link findFiles} looks: a mount table other than this process's. */
export interface FindFilesView {
  /** The mount table of the view (e.g. another mount namespace's `/proc/<pid>/mountinfo`). */
  readonly mounts: readonly MountInfo[];
  /** What this process puts before the view's paths (e.g. `/proc/<pid>/root`). */
  readonly prefix: string;
}

/**
 * Everything found under `root` (recursively) matching `pred`. Never walks into a FUSE mount: its
 * server may be gone (the walk would hang) and it holds S3 data, not the node's files. `view`: the
 * tree belongs to another mount namespace, seen through `view.prefix`.
 */
export async function findFiles(
  root: string,
  pred: (path: string, info: Deno.FileInfo) => boolean,
  view?: FindFilesView,
): Promise<string[]> {
  const out: string[] = [];
  const prefix = view?.prefix ?? "";
  const fuse = new Set(
    (view?.mounts ?? await readMountInfo()).filter((m) => m.fsType.startsWith("fuse")).map((m) =>
      `${prefix}${m.mountPoint}`
    ),
  );
  const walk = async (dir: string) => {
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(dir));
    } catch {
      return;
    }
    for (const e of entries) {
      const p = `${dir}/${e.name}`;
      if (fuse.has(p)) continue;
      const info = await Deno.lstat(p).catch(() => undefined);
      if (!info) continue;
      if (pred(p, info)) out.push(p);
      if (info.isDirectory) await walk(p);
    }
  };
  await walk(root);
  return out;
}

/** A cluster the scenarios run on, with the shared operations. */
export abstract class ScenarioCluster {
  #s3: S3Client | undefined;
  readonly #others: S3Client[] = [];

  /** Longest wait of one step, for scenarios bounded by it (the sandbox's `--timeout`). */
  stepTimeoutMs = 60_000;
  /** Leave the long-running workloads of a scenario in place (the sandbox's `--keep`). */
  keepWorkloads = false;
  /** A name unique to this run where the cluster is shared with other runs (a real tier). */
  uniqueName: (base: string) => string = (base) => base;
  /** Told of each cluster-scoped object a scenario creates (deleted by whoever owns the run). */
  onCreated: (resource: Resource, name: string) => void = () => {};
  /** What is known about why the controller has not acted (not running, its last warning). */
  controllerProblem: () => Promise<string | undefined> = () => Promise.resolve(undefined);
  /** Why dynamic provisioning cannot work on this cluster, or undefined when it can. */
  provisioningProblem: () => string | undefined = () => undefined;

  /** Kubernetes API client (admin). */
  abstract get client(): KubeClient;
  /** S3 as reached from this process (the driver may reach it at another address). */
  abstract get s3Env(): ScenarioS3Env;
  /** Namespace of the workloads. */
  abstract get ns(): string;
  /** Image of the workload pods (a busybox) and its pull policy (omitted when undefined). */
  abstract get workloadImage(): { readonly image: string; readonly pullPolicy?: string };
  /**
   * Seconds a workload pod gets to stop: its `sh`/`sleep` runs as PID 1 and ignores SIGTERM, so
   * every deletion of a running workload waits this long.
   */
  get workloadGraceSeconds(): number {
    return 3;
  }
  /**
   * Whether the driver's admission policies of volumes run on this cluster (a real API server
   * with the deployed manifests): a PV the node would refuse is then refused at creation.
   */
  get volumeAdmission(): boolean {
    return false;
  }
  /** Namespace of the Mountpoint Pods. */
  get mpNamespace(): string {
    return DEFAULT_MOUNTPOINT_NAMESPACE;
  }
  /** Admin kubeconfig of the cluster (for kubectl). */
  abstract get kubeconfig(): string;
  /** Node names. */
  abstract nodeNames(): string[];
  /** Kubelet root dir of a node, as seen from this process. */
  abstract kubeletRoot(node: string): string;
  /** Output of a pod's container (`main` unless named). */
  abstract log(pod: Pod, container?: string): Promise<string>;
  /** FUSE mounts (sources and targets) of the cluster's nodes. */
  abstract fuseMounts(): Promise<MountInfo[]>;
  /** FUSE mounts of one node (by default: those under its kubelet root). */
  async fuseMountsOn(node: string): Promise<MountInfo[]> {
    const root = `${this.kubeletRoot(node)}/`;
    return (await this.fuseMounts()).filter((m) => m.mountPoint.startsWith(root));
  }
  /** Credential files (and dirs) the node plugin wrote for Mountpoint Pods. */
  abstract credentialFiles(): Promise<string[]>;
  /**
   * Mounter, engine and workload processes still running (not the driver's own); engines serving
   * one of `buckets` at least.
   */
  abstract engineProcesses(buckets: readonly string[]): Promise<string[]>;
  /** Directories on the nodes of the pods `uids` (deleted pods: none should be left). */
  abstract leftoverPodDirs(uids: readonly string[]): Promise<string[]>;
  /** Unix sockets on the nodes other than the driver's and the kubelet's own. */
  abstract foreignSockets(): Promise<string[]>;
  /** The node plugins' recent log lines (for failure messages). */
  protected abstract nodePluginLogs(): Promise<string>;
  /**
   * Install the driver at `version` as an operator upgrades or rolls back: images of this tree
   * built with that version (`S3CSI_VERSION`), then `deno task deploy` (the version the cluster
   * started with: `DRIVER_VERSION`). Resolves with deploy's summary line. Only a cluster that
   * deploys the driver can (the real node); the others refuse.
   */
  deployVersion(version: string): Promise<string> {
    return Promise.reject(new Error(`this cluster cannot deploy driver version ${version}`));
  }

  /** S3 client of the main user. */
  get s3(): S3Client {
    return this.#s3 ??= this.s3Client(
      this.s3Env.AWS_ACCESS_KEY_ID,
      this.s3Env.AWS_SECRET_ACCESS_KEY,
    );
  }

  /** An S3 client with other keys (destroyed by {@link close}). */
  s3Client(accessKeyId: string, secretAccessKey: string): S3Client {
    const e = this.s3Env;
    const c = new S3Client({
      endpoint: e.S3_ENDPOINT,
      region: e.AWS_REGION,
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
    this.#others.push(c);
    return c;
  }

  /** An S3 client of the second user. */
  otherS3(): S3Client {
    const e = this.s3Env;
    return this.s3Client(e.S3_OTHER_ACCESS_KEY_ID!, e.S3_OTHER_SECRET_ACCESS_KEY!);
  }

  /** Release the S3 clients. */
  close(): void {
    for (const c of this.#others) c.destroy();
    this.#others.length = 0;
    this.#s3 = undefined;
  }

  /** Release what this cluster object holds (the S3 clients; an API client of its own). */
  dispose(): Promise<void> {
    this.close();
    return Promise.resolve();
  }

  /** Create a bucket (with `client`, default the main user); returns its name. */
  async bucket(prefix: string, client: S3Client = this.s3): Promise<string> {
    const name = `${prefix}-${unique()}`;
    await client.send(new CreateBucketCommand({ Bucket: name }));
    return name;
  }

  /**
   * A bucket the second S3 user owns (and the main user may or may not read: see
   * {@link usersIsolated}). On versitygw, whose second user (role `user`) may not create buckets,
   * the root user creates it for that owner.
   */
  async otherUsersBucket(prefix: string): Promise<string> {
    const e = this.s3Env;
    if (e.S3_SERVER !== "versitygw") return await this.bucket(prefix, this.otherS3());
    const name = `${prefix}-${unique()}`;
    await createBucketFor(e, name, e.S3_OTHER_ACCESS_KEY_ID!);
    return name;
  }

  /**
   * Whether the main user is refused the second user's buckets: on Ceph RGW, yes; on versitygw the
   * main user is its root account, which reads every bucket.
   */
  get usersIsolated(): boolean {
    return this.s3Env.S3_SERVER !== "versitygw";
  }

  /** True when `bucket` exists (HeadBucket); false on 404. */
  async bucketExists(bucket: string): Promise<boolean> {
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: bucket }));
      return true;
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata
        ?.httpStatusCode;
      if (status === 404 || (err as Error).name === "NotFound") return false;
      throw err;
    }
  }

  /** Empty and delete a bucket (best effort). */
  async dropBucket(bucket: string, client: S3Client = this.s3): Promise<void> {
    try {
      const list = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      for (const o of list.Contents ?? []) {
        await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key! }));
      }
      await client.send(new DeleteBucketCommand({ Bucket: bucket }));
    } catch { /* best effort */ }
  }

  /** Put an object. */
  async put(
    bucket: string,
    key: string,
    body: string | Uint8Array,
    client: S3Client = this.s3,
  ): Promise<void> {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  }

  /** An object's body as text. */
  async get(bucket: string, key: string, client: S3Client = this.s3): Promise<string> {
    const r = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return await r.Body!.transformToString();
  }

  /** Keys of a bucket (optionally under a prefix). */
  async keys(bucket: string, prefix?: string, client: S3Client = this.s3): Promise<string[]> {
    const r = await client.send(
      new ListObjectsV2Command({ Bucket: bucket, ...(prefix ? { Prefix: prefix } : {}) }),
    );
    return (r.Contents ?? []).map((o) => o.Key!).sort();
  }

  /**
   * A Secret in the workload namespace with node-publish keys (and `more`, e.g. `endpoint`);
   * without keys (empty strings) only `more`.
   */
  async secret(
    name: string,
    accessKeyId: string,
    secretAccessKey: string,
    more: Record<string, string> = {},
  ): Promise<void> {
    const keys = accessKeyId === "" && secretAccessKey === ""
      ? {}
      : { access_key_id: accessKeyId, secret_access_key: secretAccessKey };
    await this.client.create(SECRETS, {
      metadata: { name, namespace: this.ns },
      type: "Opaque",
      data: Object.fromEntries(
        Object.entries({ ...keys, ...more }).map(([k, v]) => [k, btoa(v)]),
      ),
    } as KubeObject);
  }

  /** A static PV (Retain) and its PVC, both named `name`, waited until Bound. */
  async staticVolume(name: string, o: StaticVolumeOptions): Promise<void> {
    const accessModes = o.accessModes ?? ["ReadWriteMany"];
    await this.client.create(PVS, {
      metadata: { name },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes,
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: "",
        mountOptions: o.mountOptions ?? ["allow-delete", "allow-overwrite"],
        csi: {
          driver: DRIVER_NAME,
          volumeHandle: `static-${name}`,
          volumeAttributes: { bucketName: o.bucket, ...o.attributes },
          ...(o.secret ? { nodePublishSecretRef: { name: o.secret, namespace: this.ns } } : {}),
        },
      },
    } as KubeObject);
    // kube-controller-manager binds a claim naming a PV it has not seen yet only at its next
    // resync (15 s): let the PV become Available first.
    await waitFor(`PV ${name} Available`, async () => {
      const pv = await this.client.get<KubeObject & { status?: { phase?: string } }>(PVS, name);
      return pv?.status?.phase === "Available" || pv?.status?.phase === "Bound";
    }, { timeoutMs: 30_000, intervalMs: 100 });
    await this.client.create(PVCS, {
      metadata: { name, namespace: this.ns },
      spec: {
        accessModes,
        storageClassName: "",
        resources: { requests: { storage: "1Gi" } },
        volumeName: name,
      },
    } as KubeObject);
    await this.waitBound(name);
  }

  /** Wait until the PVC `name` is Bound. */
  async waitBound(name: string, timeoutMs = 30_000): Promise<void> {
    await waitFor(`PVC ${name} Bound`, async () => {
      const p = await this.client.get<KubeObject & { status?: { phase?: string } }>(
        PVCS,
        name,
        this.ns,
      );
      return p?.status?.phase === "Bound";
    }, { timeoutMs, intervalMs: 150 });
  }

  /** Delete a PVC and its (static) PV. */
  async dropVolume(name: string): Promise<void> {
    await this.client.delete(PVCS, name, this.ns).catch(() => false);
    await this.client.delete(PVS, name).catch(() => false);
  }

  /**
   * The pod spec of {@link pod} and {@link deployment}: `sh -c script` in container `main`;
   * `podNameEnv` adds `POD_NAME` from the downward API.
   */
  podSpec(o: Omit<PodOptions, "name">, podNameEnv = false): Record<string, unknown> {
    const fsGroup = o.fsGroup === undefined ? 1000 : o.fsGroup;
    const { image, pullPolicy } = this.workloadImage;
    return {
      restartPolicy: o.restartPolicy ?? "Never",
      terminationGracePeriodSeconds: this.workloadGraceSeconds,
      automountServiceAccountToken: false,
      ...(o.node ? { nodeSelector: { "kubernetes.io/hostname": o.node } } : {}),
      ...(o.tolerations ? { tolerations: [...o.tolerations] } : {}),
      ...(o.schedulingGates
        ? { schedulingGates: o.schedulingGates.map((name) => ({ name })) }
        : {}),
      ...(o.priorityClassName ? { priorityClassName: o.priorityClassName } : {}),
      securityContext: {
        runAsUser: o.runAsUser ?? 1000,
        runAsGroup: o.runAsGroup ?? 1000,
        ...(fsGroup !== null ? { fsGroup } : {}),
      },
      containers: [{
        name: "main",
        image,
        ...(pullPolicy ? { imagePullPolicy: pullPolicy } : {}),
        command: ["sh", "-c", o.script],
        env: [
          ...Object.entries(o.env ?? {}).map(([name, value]) => ({ name, value })),
          ...(podNameEnv
            ? [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }]
            : []),
        ],
        ...(o.requests ? { resources: { requests: o.requests } } : {}),
        volumeMounts: [
          ...o.volumes.map((v, i) => ({
            name: `v${i}`,
            mountPath: v.mountPath,
            ...(v.readOnly ? { readOnly: true } : {}),
          })),
          ...(o.scratch ? [{ name: "scratch", mountPath: o.scratch }] : []),
        ],
      }],
      volumes: [
        ...o.volumes.map((v, i) => ({
          name: `v${i}`,
          ...("claim" in v
            ? {
              persistentVolumeClaim: {
                claimName: v.claim,
                ...(v.readOnly ? { readOnly: true } : {}),
              },
            }
            : {
              csi: {
                driver: DRIVER_NAME,
                volumeAttributes: v.inline.attributes,
                ...(v.readOnly ? { readOnly: true } : {}),
                ...(v.inline.secret ? { nodePublishSecretRef: { name: v.inline.secret } } : {}),
              },
            }),
        })),
        ...(o.scratch ? [{ name: "scratch", emptyDir: {} }] : []),
      ],
    };
  }

  /** Create a workload pod running `sh -c script` in container `main`. */
  async pod(o: PodOptions): Promise<Pod> {
    return await this.client.create<Pod>(PODS, {
      metadata: { name: o.name, namespace: this.ns, ...(o.labels ? { labels: o.labels } : {}) },
      spec: this.podSpec(o),
    } as unknown as Pod);
  }

  /**
   * A Deployment of `replicas` workload pods (label `app: <name>`; `POD_NAME` in their env is
   * their own name): workloads that `kubectl drain` may evict (it refuses bare pods).
   */
  async deployment(o: DeploymentOptions): Promise<void> {
    const labels = { ...o.labels, app: o.name };
    const spec = this.podSpec({ ...o, restartPolicy: "Always" }, true);
    await this.client.create(DEPLOYMENTS, {
      metadata: { name: o.name, namespace: this.ns, labels },
      spec: {
        replicas: o.replicas,
        selector: { matchLabels: { app: o.name } },
        template: { metadata: { labels }, spec },
      },
    } as KubeObject);
  }

  /** Set a Deployment's replica count. */
  async scale(name: string, replicas: number): Promise<void> {
    await this.client.patch(DEPLOYMENTS, name, this.ns, { spec: { replicas } });
  }

  /** Delete a Deployment and wait until its pods are gone (unpublished). */
  async deleteDeployment(name: string, timeoutMs = 90_000): Promise<void> {
    await this.client.delete(DEPLOYMENTS, name, this.ns, { propagationPolicy: "Foreground" })
      .catch(() => false);
    await waitFor(
      `Deployment ${name} and its pods gone`,
      async () =>
        !(await this.client.get(DEPLOYMENTS, name, this.ns)) &&
        !(await this.podsWith(`app=${name}`)).length,
      { timeoutMs, intervalMs: 250 },
    );
  }

  /** Workload pods with a label selector (namespace of the workloads). */
  async podsWith(labelSelector: string): Promise<Pod[]> {
    return (await this.client.list<Pod>(PODS, { namespace: this.ns, labelSelector })).items;
  }

  /** Every pod bound to `node`, in every namespace. */
  async podsOn(node: string): Promise<Pod[]> {
    return (await this.client.list<Pod>(PODS, { fieldSelector: `spec.nodeName=${node}` })).items;
  }

  /** `kubectl` (the suite's, of the cluster's release) against this cluster. */
  async kubectl(args: readonly string[], timeoutMs = 60_000): Promise<KubectlResult> {
    return await kubectl(this.kubeconfig, args, { timeoutMs });
  }

  /** Change a node's spec (taints, unschedulable) against a fresh copy; retried on conflicts. */
  async #editNode(node: string, edit: (spec: NonNullable<NodeLike["spec"]>) => object) {
    for (let attempt = 0;; attempt++) {
      const n = await this.client.get<NodeLike>(NODES, node);
      if (!n) throw new Error(`no node ${node}`);
      try {
        await this.client.patch(NODES, node, undefined, {
          metadata: { resourceVersion: n.metadata!.resourceVersion },
          spec: edit(n.spec ?? {}),
        });
        return;
      } catch (err) {
        if (!(err instanceof ConflictError) || attempt > 10) throw err;
      }
    }
  }

  /** Mark a node unschedulable (`kubectl cordon`) or schedulable again. */
  async cordon(node: string, unschedulable: boolean): Promise<void> {
    await this.#editNode(node, () => ({ unschedulable: unschedulable ? true : null }));
  }

  /** Add a taint to a node (replacing one with the same key and effect). */
  async taint(node: string, taint: Taint): Promise<void> {
    await this.#editNode(node, (spec) => ({
      taints: [
        ...(spec.taints ?? []).filter((t) => !(t.key === taint.key && t.effect === taint.effect)),
        taint,
      ],
    }));
  }

  /** Remove every taint with `key` from a node. */
  async untaint(node: string, key: string): Promise<void> {
    await this.#editNode(node, (spec) => ({
      taints: (spec.taints ?? []).filter((t) => t.key !== key),
    }));
  }

  /** FailedMount (or any `reason`) events of a pod. */
  async events(pod: Pod, reason = "FailedMount"): Promise<KubeEvent[]> {
    return (await this.client.list<KubeEvent>(EVENTS, { namespace: this.ns })).items.filter((e) =>
      e.reason === reason && e.involvedObject?.uid === pod.metadata.uid
    );
  }

  /** Why a pod is not done: last FailedMount event, the container output, the node plugins. */
  async diagnose(pod: Pod): Promise<string> {
    const last = (await this.events(pod)).at(-1)?.message;
    const p = await this.client.get<Pod>(PODS, pod.metadata.name, this.ns);
    return `phase ${p?.status?.phase ?? "gone"}${last ? `; last FailedMount: ${last}` : ""}; log: ${
      JSON.stringify((await this.log(pod)).slice(-800))
    }${await this.nodePluginLogs()}`;
  }

  /** Wait until a pod reached one of `phases` (Failed is an error unless listed). */
  async waitPhase(pod: Pod, phases: string[], timeoutMs = 60_000): Promise<Pod> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const p = await this.client.get<Pod>(PODS, pod.metadata.name, this.ns);
      const phase = p?.status?.phase ?? "";
      if (phases.includes(phase)) return p!;
      if (phase === "Failed") {
        throw new Error(`pod ${pod.metadata.name} failed: ${await this.diagnose(pod)}`);
      }
      if (Date.now() > deadline) {
        throw new Error(
          `pod ${pod.metadata.name} not ${phases.join("/")} within ${
            timeoutMs / 1000
          } s: ${await this
            .diagnose(pod)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Run a pod to completion; returns its output. */
  async run(o: PodOptions, timeoutMs = 60_000): Promise<string> {
    const pod = await this.pod(o);
    try {
      await this.waitPhase(pod, ["Succeeded"], timeoutMs);
      return await this.log(pod);
    } finally {
      await this.deletePod(pod.metadata.name);
    }
  }

  /** Wait until a running pod printed `marker`. */
  async waitLog(pod: Pod, marker: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await this.log(pod)).includes(marker)) {
      const p = await this.client.get<Pod>(PODS, pod.metadata.name, this.ns);
      if (p?.status?.phase === "Failed" || p?.status?.phase === "Succeeded") {
        throw new Error(`pod ${pod.metadata.name} ended: ${await this.diagnose(pod)}`);
      }
      if (Date.now() > deadline) {
        throw new Error(
          `pod ${pod.metadata.name} did not print ${marker}: ${await this.diagnose(pod)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Delete a pod and wait until it is gone (unpublished). */
  async deletePod(name: string, timeoutMs = 60_000): Promise<void> {
    await this.client.delete(PODS, name, this.ns).catch(() => false);
    await waitFor(`pod ${name} gone`, async () => !(await this.client.get(PODS, name, this.ns)), {
      timeoutMs,
      intervalMs: 150,
    });
  }

  /** Mountpoint Pods. */
  async mountpointPods(): Promise<Pod[]> {
    return (await this.client.list<Pod>(PODS, {
      namespace: this.mpNamespace,
      labelSelector: `${LABEL_COMPONENT}=${COMPONENT_MOUNTPOINT_POD}`,
    })).items;
  }

  /** S3PAs. */
  async s3pas(): Promise<S3paLike[]> {
    return (await this.client.list<S3paLike>(S3PAS)).items;
  }

  /**
   * Whether each container runs in a memory cgroup of its own that this process may lower (a real
   * node's container runtime); the emulated kubelet's processes share the test runner's.
   */
  get containerCgroups(): boolean {
    return false;
  }

  /**
   * Host pids of Mountpoint Pod `name`'s container: its init process (the mounter become the
   * supervisor) and the engine it runs (undefined while none runs).
   */
  abstract mountpointProcesses(
    name: string,
  ): Promise<{ readonly container?: number; readonly engine?: number }>;

  /** Kill Mountpoint Pod `name`'s container, every process of it; its kubelet restarts it. */
  abstract killMountpointContainer(name: string): Promise<void>;

  /** Restart count of Mountpoint Pod `name`'s container, from its status (0 when unknown). */
  async mountpointRestarts(name: string): Promise<number> {
    const pod = await this.client.get<Pod>(PODS, name, DEFAULT_MOUNTPOINT_NAMESPACE);
    return mountpointContainerStatus(pod)?.restartCount ?? 0;
  }

  /**
   * For each volume mount of running workload `pod`: a path this (host) process can stat that
   * resolves in the workload's own mount namespace (`/proc/PID/root/<mountPath>` of one of its
   * processes where containers have one of their own; the target path where they share the
   * host's). A dead FUSE mount there answers ENOTCONN even when the host's view was repaired.
   */
  abstract workloadMountViews(
    pod: Pod,
  ): Promise<{ readonly mountPath: string; readonly view: string }[]>;

  /**
   * The closing check every sandbox run makes (issue "Mounts outlive their engine"): no Mountpoint
   * container was restarted, and every running workload's volume answers a stat and a listing
   * from inside the workload (each bounded: a hung mount is a problem, never a hang of the check).
   */
  async closingCheck(): Promise<{ readonly detail: string; readonly problems: string[] }> {
    const problems: string[] = [];
    let restarts = 0;
    for (const mp of await this.mountpointPods()) {
      const c = mountpointContainerStatus(mp);
      if (!c?.restartCount) continue;
      restarts += c.restartCount;
      const last = c.lastState?.terminated;
      problems.push(
        `Mountpoint Pod ${mp.metadata.name}: its container restarted ${c.restartCount} time(s)${
          last ? ` (last: ${last.reason ?? "terminated"}, exit code ${last.exitCode})` : ""
        }`,
      );
    }
    const workloads = (await this.client.list<Pod>(PODS, { namespace: this.ns })).items.filter(
      (p) => p.status?.phase === "Running" && !p.metadata.deletionTimestamp,
    );
    let checked = 0;
    for (const pod of workloads) {
      for (const { mountPath, view } of await this.workloadMountViews(pod)) {
        checked++;
        const r = await runToEnd("timeout", [
          "10",
          "sh",
          "-c",
          'stat -c %i "$1" > /dev/null && ls -A "$1" > /dev/null',
          "sh",
          view,
        ]);
        if (r.code !== 0) {
          problems.push(
            `workload ${pod.metadata.name}: ${mountPath} fails from inside: ${
              r.code === 124 ? "no answer in 10 s" : r.stderr.trim().split("\n")[0]
            }`,
          );
        }
      }
    }
    return {
      detail:
        `${restarts} Mountpoint container restart(s); ${checked} workload mount(s) checked from inside`,
      problems,
    };
  }

  /** The Mountpoint Pod serving a workload pod (from the S3PAs). */
  async mountpointPodOf(pod: Pod): Promise<string | undefined> {
    for (const s of await this.s3pas()) {
      for (const [mp, ws] of Object.entries(s.spec?.mountpointS3PodAttachments ?? {})) {
        if (ws.some((w) => w.workloadPodUID === pod.metadata.uid)) return mp;
      }
    }
    return undefined;
  }

  /** Wait until the controller released every Mountpoint Pod and S3PA. */
  async waitReleased(timeoutMs = 45_000): Promise<void> {
    await waitFor(
      "Mountpoint Pods and S3PAs released",
      async () => !(await this.mountpointPods()).length && !(await this.s3pas()).length,
      { timeoutMs, intervalMs: 250 },
    );
  }
}

/** Run `scenarios` as steps of one test (`t.step` each). */
export function stepsOf(
  t: Deno.TestContext,
  detail: (name: string, detail: string) => void = () => {},
): Step {
  return (name, fn) =>
    t.step(name, async () => {
      const d = await fn();
      if (d) detail(name, d);
    });
}
