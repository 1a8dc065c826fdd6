/**
 * The Mountpoint Pod the controller creates for one sharing key: pure, so it can be unit-tested
 * and compared field by field.
 *
 * What it guarantees (each a requirement of the node plugin, the kubelet or the cluster):
 * - pinned to the workload's node by node affinity on `metadata.name` (not `nodeName`, so the
 *   scheduler still checks resources and may preempt), Linux only; it tolerates every scheduling
 *   taint and the `NoExecute` taints its workloads tolerate (`tolerations.ts`);
 * - controlled by its Node (an owner reference, as the kubelet sets on mirror pods): `kubectl
 *   drain` then treats it as managed, and the garbage collector removes it with its Node;
 * - unprivileged: non-root uid/gid, `fsGroup` so the node plugin's root-written files in the comm
 *   dir are readable, read-only root filesystem, no capabilities, no privilege escalation,
 *   seccomp `RuntimeDefault`, no service-account token;
 * - a `comm` emptyDir (Memory, small) at `/comm`, where the mounter listens for the FUSE fd, and
 *   a `work` emptyDir at `/work`, the mounter's private working dir (engine HOME), so nothing of
 *   the engine lands next to the credentials and a restarted mounter starts clean;
 * - bounded local disk: the `work` emptyDir has a size limit, a disk emptyDir cache always has one
 *   (the PV's, else the configured default), and the container an `ephemeral-storage` limit that
 *   adds them up with room for its logs — a pod that writes more is evicted by the kubelet, it
 *   cannot fill the node's disk;
 * - with a local cache (PV attributes `cache: emptyDir|ephemeral`, see `cache_volume.ts`), a
 *   `cache` volume at `/cache` (an emptyDir with the volume's size limit and medium, or a generic
 *   ephemeral volume), named to the mounter by `MOUNTER_CACHE_DIR`; never the comm dir;
 * - with a custom CA (`--tls-ca-configmap`), the bundle at `/etc/ssl/custom-ca/ca-bundle.crt`,
 *   named to the mounter by `MOUNTER_CA_BUNDLE` (it becomes the engine's CA bundle);
 * - with a metrics port (`--mountpoint-metrics-port`), a container port named `metrics` where the
 *   engine serves the volume's Prometheus figures, labelled by volume and pod (`engine_metrics.ts`;
 *   `MOUNTER_METRICS_PORT`, `MOUNTER_METRICS_LABELS`) and the `prometheus.io/*` annotations;
 * - `restartPolicy: OnFailure`: the mounter exits 0 only when asked to (pod `Succeeded`);
 * - a long termination grace so it outlives workloads on node drain (where a
 *   PodDisruptionBudget refuses its eviction until its workloads are gone: `render_cluster.ts`);
 * - labels/annotations that tie it to its volume and attachment, and let cluster-autoscaler
 *   treat it like a DaemonSet pod.
 *
 * {@link mountpointPodInvariants} states, from the same constants, what every such pod has whatever
 * its volume: the node plugin checks a pod against it before it hands the pod credentials and a
 * FUSE connection (`node/pod_invariants.ts`), so a pod someone else made under the expected name is
 * refused.
 *
 * @module
 */
import type { Pod, PodVolume } from "../kube/types.ts";
import type { S3paSpec } from "../api/mountpoint_s3_pod_attachment.ts";
import { ANNOTATION_MOUNT_PROTOCOLS, formatProtocols, OUR_PROTOCOLS } from "./mount_protocol.ts";
import {
  ANNOTATION_ATTACHMENT,
  ANNOTATION_VOLUME_ID,
  ANNOTATION_VOLUME_NAME,
  COMPONENT_MOUNTPOINT_POD,
  LABEL_COMPONENT,
  LABEL_DRIVER_VERSION,
  LABEL_MOUNTPOINT_VERSION,
} from "./labels.ts";
import { COMM_DIR, COMM_VOLUME_NAME, WORK_DIR, WORK_VOLUME_NAME } from "./paths.ts";
import { bytesQuantity, nonNegativeQuantity } from "../kube/quantity.ts";
import { engineMetricsLabels, METRICS_PORT_NAME } from "./engine_metrics.ts";
import { mountpointTolerations } from "./tolerations.ts";
import {
  CACHE_DIR,
  CACHE_VOLUME_NAME,
  type CacheConfig,
  CacheConfigError,
  cacheVolume,
  DEFAULT_CACHE_SIZE_LIMIT,
  parseCacheConfig,
  withDefaultSizeLimit,
} from "./cache_volume.ts";

/** Size limit of the comm emptyDir (socket, two small files, credentials). */
export const COMM_SIZE_LIMIT = "10Mi";
/**
 * Default size limit of the `work` emptyDir: rclone's files without a cache (its metadata), the
 * engine's session table (about 100 bytes per inode the kernel knows: tens of MiB), HOME.
 */
export const DEFAULT_WORK_SIZE_LIMIT = "256Mi";
/** Room for the container's logs (the kubelet keeps up to 5 × 10 MiB) in its ephemeral-storage limit. */
export const LOGS_EPHEMERAL_STORAGE = "128Mi";
/** Default image of Mountpoint Pods (controller and node plugin `--mountpoint-image`). */
export const DEFAULT_MOUNTPOINT_IMAGE = "ghcr.io/scality/s3-csi-mounter:latest";
/** Default entrypoint of the Mountpoint container (`--mountpoint-command`). */
export const DEFAULT_MOUNTPOINT_COMMAND = "/bin/s3-csi-mounter";
/** Default non-root uid/gid of the Mountpoint container (`--mountpoint-uid`). */
export const DEFAULT_MOUNTPOINT_UID = 1000;
/** Name of the container in Mountpoint Pods. */
export const MOUNTPOINT_CONTAINER = "mountpoint";
/** Where a custom CA bundle is mounted in Mountpoint Pods. */
export const CUSTOM_CA_DIR = "/etc/ssl/custom-ca";
/** The custom CA bundle file in Mountpoint Pods. */
export const CUSTOM_CA_FILE = `${CUSTOM_CA_DIR}/ca-bundle.crt`;
/** Name of the custom CA volume in Mountpoint Pods. */
export const CUSTOM_CA_VOLUME_NAME = "custom-ca";

/** PV volume attributes that tune the Mountpoint container's resources. */
export const RESOURCE_ATTRIBUTES = {
  "requests.cpu": "mountpointContainerResourcesRequestsCpu",
  "requests.memory": "mountpointContainerResourcesRequestsMemory",
  "limits.cpu": "mountpointContainerResourcesLimitsCpu",
  "limits.memory": "mountpointContainerResourcesLimitsMemory",
} as const;

/** PV volume attribute naming the Mountpoint Pod's service account. */
export const SERVICE_ACCOUNT_ATTRIBUTE = "mountpointPodServiceAccountName";

/** The mounter's environment variables in Mountpoint Pods. */
export const MOUNTER_ENV = {
  commDir: "MOUNTER_COMM_DIR",
  workDir: "MOUNTER_WORK_DIR",
  drainGrace: "MOUNTER_DRAIN_GRACE",
  cacheDir: "MOUNTER_CACHE_DIR",
  caBundle: "MOUNTER_CA_BUNDLE",
  metricsPort: "MOUNTER_METRICS_PORT",
  metricsLabels: "MOUNTER_METRICS_LABELS",
} as const;

/** Labels with a fixed value on every Mountpoint Pod. */
export const MOUNTPOINT_POD_LABELS: Readonly<Record<string, string>> = {
  "app.kubernetes.io/name": "s3-csi-mountpoint",
  [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD,
};

/** The container command the controller renders for `--mountpoint-command`. */
export function mountpointCommand(command: string): string[] {
  return [command];
}

/** A volume a Mountpoint Pod may have. */
export interface AllowedVolume {
  /** Volume sources it may be (`emptyDir`, `ephemeral`, `configMap`). */
  readonly sources: readonly string[];
  /** Where the container mounts it. */
  readonly mountPath: string;
  /** Every Mountpoint Pod has it. */
  readonly required: boolean;
  /** Mounted read-only. */
  readonly readOnly: boolean;
}

/** What every Mountpoint Pod the controller makes has, whatever volume it serves. */
export interface MountpointPodInvariants {
  /** The one container's name. */
  readonly container: string;
  readonly image: string;
  readonly command: readonly string[];
  /** The container's user and group (also the pod's `fsGroup`). */
  readonly uid: number;
  /** The volumes it may have, by name. */
  readonly volumes: Readonly<Record<string, AllowedVolume>>;
  /** Labels with a fixed value. */
  readonly labels: Readonly<Record<string, string>>;
  /** Labels it always has, whatever their value. */
  readonly labelKeys: readonly string[];
  /** Environment variables the container may have: the fixed value, or undefined for any. */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The volumes of Mountpoint Pods, with their mount paths. */
const VOLUMES: Readonly<Record<string, AllowedVolume>> = {
  [COMM_VOLUME_NAME]: {
    sources: ["emptyDir"],
    mountPath: COMM_DIR,
    required: true,
    readOnly: false,
  },
  [WORK_VOLUME_NAME]: {
    sources: ["emptyDir"],
    mountPath: WORK_DIR,
    required: true,
    readOnly: false,
  },
  [CACHE_VOLUME_NAME]: {
    sources: ["emptyDir", "ephemeral"],
    mountPath: CACHE_DIR,
    required: false,
    readOnly: false,
  },
  [CUSTOM_CA_VOLUME_NAME]: {
    sources: ["configMap"],
    mountPath: CUSTOM_CA_DIR,
    required: false,
    readOnly: true,
  },
};

/**
 * The invariants of the Mountpoint Pods that {@link mountpointPod} builds with `config` (only the
 * image, command and uid vary with it).
 */
export function mountpointPodInvariants(
  config: Pick<MountpointPodConfig, "image" | "command" | "uid">,
): MountpointPodInvariants {
  return {
    container: MOUNTPOINT_CONTAINER,
    image: config.image,
    command: mountpointCommand(config.command),
    uid: config.uid,
    volumes: VOLUMES,
    labels: MOUNTPOINT_POD_LABELS,
    labelKeys: [LABEL_DRIVER_VERSION],
    env: {
      [MOUNTER_ENV.commDir]: COMM_DIR,
      [MOUNTER_ENV.workDir]: WORK_DIR,
      [MOUNTER_ENV.drainGrace]: undefined,
      [MOUNTER_ENV.cacheDir]: CACHE_DIR,
      [MOUNTER_ENV.caBundle]: CUSTOM_CA_FILE,
      // Any value: the controller's metrics port and the volume's labels (no path).
      [MOUNTER_ENV.metricsPort]: undefined,
      [MOUNTER_ENV.metricsLabels]: undefined,
    },
  };
}

/** Cluster-wide settings for Mountpoint Pods (from the controller's flags). */
export interface MountpointPodConfig {
  readonly namespace: string;
  readonly image: string;
  readonly imagePullPolicy: string;
  readonly command: string;
  readonly driverVersion: string;
  readonly mountpointVersion: string;
  readonly priorityClassName: string;
  readonly uid: number;
  readonly terminationGraceSeconds: number;
  readonly extraLabels: Readonly<Record<string, string>>;
  readonly cpuRequest: string;
  readonly memoryRequest: string;
  readonly memoryLimit: string;
  /** ConfigMap with `ca-bundle.crt`, or "". */
  readonly caConfigMap: string;
  /** Size limit of the `work` emptyDir. @default {@link DEFAULT_WORK_SIZE_LIMIT} */
  readonly workSizeLimit?: string;
  /**
   * Size limit of a disk emptyDir cache whose PV sets none (the deprecated `cache` mount option,
   * or `cache: emptyDir` without `cacheEmptyDirSizeLimit`). @default {@link DEFAULT_CACHE_SIZE_LIMIT}
   */
  readonly cacheSizeLimit?: string;
  /** Port of the engine's Prometheus endpoint; 0 or absent: none. */
  readonly metricsPort?: number;
}

/** What one Mountpoint Pod serves. */
export interface MountpointPodTarget {
  readonly name: string;
  readonly attachmentName: string;
  readonly spec: Omit<S3paSpec, "mountpointS3PodAttachments">;
  /** The PV's `spec.csi.volumeAttributes`. */
  readonly volumeAttributes: Readonly<Record<string, string>>;
  /** The PV's `spec.mountOptions` (a `cache` option enables an emptyDir cache). */
  readonly mountOptions?: readonly string[];
  /** `spec.tolerations` of the workloads it is created for (see `tolerations.ts`). */
  readonly workloadTolerations?: readonly (readonly unknown[] | undefined)[];
  /** UID of the node (`spec.nodeName`), for the owner reference; none when unknown. */
  readonly nodeUid?: string;
  /** Priority class instead of the configured one (headroom: the preempting class). */
  readonly priorityClassName?: string;
}

/** A bad PV attribute that stops Mountpoint Pod creation (reported as an Event on the workload). */
export class MountpointPodSpecError extends Error {
  override name = "MountpointPodSpecError";
}

/**
 * The container's `ephemeral-storage` limit: what the pod may write to the node's disk — the
 * `work` emptyDir, a disk emptyDir cache and the container's logs (its root filesystem is
 * read-only). The kubelet evicts the pod past it, or past an emptyDir's own limit.
 */
function ephemeralStorageLimit(workSizeLimit: string, cache: CacheConfig | undefined): string {
  let bytes = nonNegativeQuantity(workSizeLimit)! + nonNegativeQuantity(LOGS_EPHEMERAL_STORAGE)!;
  if (cache?.type === "emptyDir" && !cache.medium && cache.sizeLimitBytes !== undefined) {
    bytes += cache.sizeLimitBytes;
  }
  return bytesQuantity(Math.ceil(bytes));
}

/**
 * Requests and limits of the Mountpoint container for a PV: the configured defaults, overridden by
 * the PV's `mountpointContainerResources*` attributes; `ephemeralStorage` the limit of what it may
 * write to the node's disk (headroom reads the requests only).
 * @throws {MountpointPodSpecError} on an attribute that is not a quantity
 */
export function mountpointResources(
  config: MountpointPodConfig,
  attrs: Readonly<Record<string, string>>,
  ephemeralStorage = "0",
): { requests: Record<string, string>; limits: Record<string, string> } {
  const out: { requests: Record<string, string>; limits: Record<string, string> } = {
    requests: {},
    limits: { "ephemeral-storage": ephemeralStorage },
  };
  if (config.cpuRequest) out.requests.cpu = config.cpuRequest;
  if (config.memoryRequest) out.requests.memory = config.memoryRequest;
  if (config.memoryLimit) out.limits.memory = config.memoryLimit;
  for (const [path, attr] of Object.entries(RESOURCE_ATTRIBUTES)) {
    const value = attrs[attr];
    if (value === undefined || value === "") continue;
    if (nonNegativeQuantity(value) === undefined) {
      throw new MountpointPodSpecError(
        `PV volume attribute ${attr}="${value}" is not a Kubernetes quantity (e.g. 500m, 1Gi): fix the PersistentVolume`,
      );
    }
    const [kind, resource] = path.split(".") as ["requests" | "limits", string];
    out[kind][resource] = value;
  }
  return out;
}

/** PV `spec.mountOptions` entries that enable the (deprecated) cache mount option. */
export function hasCacheMountOption(mountOptions: readonly string[]): boolean {
  return mountOptions.some((o) => /^-{0,2}cache(?:[= ]|$)/.test(o.trim()));
}

/**
 * The local cache of a PV (attributes and mount options).
 * @throws {MountpointPodSpecError} on bad cache attributes
 */
export function pvCache(
  volumeAttributes: Readonly<Record<string, string>>,
  mountOptions: readonly string[],
): CacheConfig | undefined {
  try {
    return parseCacheConfig(volumeAttributes, hasCacheMountOption(mountOptions));
  } catch (err) {
    if (err instanceof CacheConfigError) {
      throw new MountpointPodSpecError(`${err.message}: fix the PersistentVolume`);
    }
    throw err;
  }
}

/** Build the Mountpoint Pod for `target`. @throws {MountpointPodSpecError} on a bad PV attribute */
export function mountpointPod(config: MountpointPodConfig, target: MountpointPodTarget): Pod {
  const uid = config.uid;
  const labels: Record<string, string> = {
    ...config.extraLabels,
    ...MOUNTPOINT_POD_LABELS,
    [LABEL_DRIVER_VERSION]: config.driverVersion,
  };
  if (config.mountpointVersion) labels[LABEL_MOUNTPOINT_VERSION] = config.mountpointVersion;
  const workSizeLimit = config.workSizeLimit || DEFAULT_WORK_SIZE_LIMIT;
  const volumes: Pod["spec"]["volumes"] = [
    { name: COMM_VOLUME_NAME, emptyDir: { medium: "Memory", sizeLimit: COMM_SIZE_LIMIT } },
    { name: WORK_VOLUME_NAME, emptyDir: { sizeLimit: workSizeLimit } },
  ];
  const mount = (name: string) => {
    const v = VOLUMES[name]!;
    return { name, mountPath: v.mountPath, ...(v.readOnly ? { readOnly: true } : {}) };
  };
  const mounts = [mount(COMM_VOLUME_NAME), mount(WORK_VOLUME_NAME)];
  const env: { name: string; value: string }[] = [
    { name: MOUNTER_ENV.commDir, value: COMM_DIR },
    { name: MOUNTER_ENV.workDir, value: WORK_DIR },
    // On eviction (node drain) keep serving the workloads evicted alongside, until the node
    // plugin unmounts; 30 s before the grace ends the engine is stopped cleanly.
    {
      name: MOUNTER_ENV.drainGrace,
      value: `${Math.max(0, config.terminationGraceSeconds - 30)}s`,
    },
  ];
  const pv = pvCache(target.volumeAttributes, target.mountOptions ?? []);
  const cache = pv && withDefaultSizeLimit(pv, config.cacheSizeLimit || DEFAULT_CACHE_SIZE_LIMIT);
  if (cache) {
    volumes.push(cacheVolume(cache) as PodVolume);
    mounts.push(mount(CACHE_VOLUME_NAME));
    env.push({ name: MOUNTER_ENV.cacheDir, value: CACHE_DIR });
  }
  if (config.caConfigMap) {
    env.push({ name: MOUNTER_ENV.caBundle, value: CUSTOM_CA_FILE });
    volumes.push({
      name: CUSTOM_CA_VOLUME_NAME,
      configMap: {
        name: config.caConfigMap,
        items: [{ key: "ca-bundle.crt", path: "ca-bundle.crt" }],
      },
    });
    mounts.push(mount(CUSTOM_CA_VOLUME_NAME));
  }
  const metricsPort = config.metricsPort ?? 0;
  const scrape: Record<string, string> = {};
  if (metricsPort > 0) {
    const labels = engineMetricsLabels(
      target.name,
      target.spec.persistentVolumeName,
      target.spec.volumeID,
    );
    env.push(
      { name: MOUNTER_ENV.metricsPort, value: String(metricsPort) },
      { name: MOUNTER_ENV.metricsLabels, value: JSON.stringify(labels) },
    );
    scrape["prometheus.io/scrape"] = "true";
    scrape["prometheus.io/port"] = String(metricsPort);
    scrape["prometheus.io/path"] = "/metrics";
  }
  const serviceAccount = target.volumeAttributes[SERVICE_ACCOUNT_ATTRIBUTE];
  const priorityClassName = target.priorityClassName ?? config.priorityClassName;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: target.name,
      namespace: config.namespace,
      labels,
      annotations: {
        [ANNOTATION_VOLUME_NAME]: target.spec.persistentVolumeName,
        [ANNOTATION_VOLUME_ID]: target.spec.volumeID,
        [ANNOTATION_ATTACHMENT]: target.attachmentName,
        // The mount protocols this image speaks (the controller deploys its own version's image).
        [ANNOTATION_MOUNT_PROTOCOLS]: formatProtocols(OUR_PROTOCOLS),
        "cluster-autoscaler.kubernetes.io/daemonset-pod": "true",
        ...scrape,
      },
      ...(target.nodeUid
        ? {
          ownerReferences: [{
            apiVersion: "v1",
            kind: "Node",
            name: target.spec.nodeName,
            uid: target.nodeUid,
            controller: true,
          }],
        }
        : {}),
    },
    spec: {
      restartPolicy: "OnFailure",
      ...(priorityClassName ? { priorityClassName } : {}),
      ...(serviceAccount ? { serviceAccountName: serviceAccount } : {}),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: config.terminationGraceSeconds,
      nodeSelector: { "kubernetes.io/os": "linux" },
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{
              matchFields: [{
                key: "metadata.name",
                operator: "In",
                values: [target.spec.nodeName],
              }],
            }],
          },
        },
      },
      tolerations: mountpointTolerations(target.workloadTolerations ?? []),
      securityContext: {
        runAsUser: uid,
        runAsGroup: uid,
        fsGroup: uid,
        runAsNonRoot: true,
        seccompProfile: { type: "RuntimeDefault" },
      },
      containers: [{
        name: MOUNTPOINT_CONTAINER,
        image: config.image,
        imagePullPolicy: config.imagePullPolicy,
        command: mountpointCommand(config.command),
        env,
        ...(metricsPort > 0
          ? { ports: [{ name: METRICS_PORT_NAME, containerPort: metricsPort, protocol: "TCP" }] }
          : {}),
        resources: mountpointResources(
          config,
          target.volumeAttributes,
          ephemeralStorageLimit(workSizeLimit, cache),
        ),
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          runAsUser: uid,
          runAsGroup: uid,
          capabilities: { drop: ["ALL"] },
          seccompProfile: { type: "RuntimeDefault" },
        },
        volumeMounts: mounts,
      }],
      volumes,
    },
  };
}
