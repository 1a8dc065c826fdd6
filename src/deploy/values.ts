/**
 * The deployment's values: every setting a user can change, with its documented default. The
 * manifests in `k8s/deploy/` are rendered from {@link defaultValues}; users override fields with a
 * YAML/JSON file (`--values`) and `--set path=value` flags (see `values_load.ts`), and everything
 * is checked by `values_validate.ts` before anything is rendered or applied.
 *
 * Names follow the upstream Helm chart where one exists (`values.yaml` of
 * `charts/scality-mountpoint-s3-csi-driver/` in `github.com/scality/mountpoint-s3-csi-driver`) so
 * users can carry their settings over.
 *
 * @module
 */
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../mppod/labels.ts";
import { DEFAULT_KUBELET_ROOT } from "../mppod/paths.ts";
import { DEFAULT_CACHE_SIZE_LIMIT } from "../mppod/cache_volume.ts";
import {
  DEFAULT_MOUNTPOINT_COMMAND,
  DEFAULT_MOUNTPOINT_UID,
  DEFAULT_WORK_SIZE_LIMIT,
} from "../mppod/pod_spec.ts";
import { DRIVER_VERSION } from "../util/version.ts";

/** CPU/memory requests and limits of one container, as Kubernetes quantities. */
export interface ResourceValues {
  /** Requested amounts (`cpu`, `memory`). */
  requests: { cpu?: string; memory?: string };
  /** Limits (`cpu`, `memory`). */
  limits: { cpu?: string; memory?: string };
}

/** A pod toleration. */
export interface TolerationValues {
  /** Taint key (empty with Exists: every key). */
  key?: string;
  /** Exists or Equal. */
  operator?: "Exists" | "Equal";
  /** Taint value to match (with Equal). */
  value?: string;
  /** Taint effect (empty: all). */
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  /** How long a NoExecute taint is tolerated. */
  tolerationSeconds?: number;
}

/** Container images. Empty driver images default to `<image.registry>/s3-csi-<name>:<image.tag>`. */
export interface ImageValues {
  /** Registry and path prefix of the driver's own images. */
  registry: string;
  /** Tag of the driver's own images; defaults to `version` (deno.json's, or `S3CSI_VERSION`). */
  tag: string;
  /** Pull policy of every container (and of Mountpoint Pods). */
  pullPolicy: "Always" | "IfNotPresent" | "Never";
  /** Full references (`repo[:tag][@sha256:…]`); "" means derived from registry and tag. */
  node: string;
  /** Controller image; "" derives it from registry and tag. */
  controller: string;
  /** Mountpoint Pod image; "" derives it from registry and tag. */
  mounter: string;
  /** Sidecars (images and resources of the kubernetes-csi sidecar containers). */
  nodeDriverRegistrar: string;
  /** livenessprobe sidecar image. */
  livenessProbe: string;
  /** csi-provisioner image. */
  csiProvisioner: string;
}

/** Every setting of the deployment. */
export interface DeployValues {
  /**
   * Driver version the manifests deploy: the `app.kubernetes.io/version` label of every object.
   * Defaults to `deno.json`'s; `S3CSI_VERSION` (or `--driver-version`) of `deno task
   * render|deploy|undeploy` sets it and the default `image.tag` together, to deploy images built
   * with the same `S3CSI_VERSION` (`deno task images:local`).
   */
  version: string;
  /** Namespace of the node DaemonSet, the controller Deployment and their ServiceAccounts. */
  namespace: string;
  /** Extra labels on every object. */
  customLabels: Record<string, string>;
  /** Image pull Secrets (names, in `namespace`) for the node and controller pods. */
  imagePullSecrets: string[];
  /** Container images. */
  image: ImageValues;
  /** S3 endpoint and default region (node and controller `AWS_ENDPOINT_URL`/`AWS_REGION`). */
  s3: { endpointUrl: string; region: string };
  /**
   * Secret (in `namespace`, created by the user) with the driver-level S3 credentials, read by the
   * node plugin and the controller as `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`
   * (every key optional); `name: ""` disables. Key names as in the upstream chart.
   */
  s3CredentialSecret: {
    name: string;
    accessKeyId: string;
    secretAccessKey: string;
    sessionToken: string;
  };
  /** CSIDriver object fields (https://kubernetes-csi.github.io/docs/csi-driver-object.html). */
  csiDriver: {
    /** `File`: the node plugin advertises VOLUME_MOUNT_GROUP, so kubelet never chowns itself. */
    fsGroupPolicy: "File" | "None" | "ReadWriteOnceWithFSType";
    /** Periodic NodePublishVolume (credential refresh), as upstream. */
    requiresRepublish: boolean;
    /**
     * CSI inline volumes (`volumeLifecycleModes: [Persistent, Ephemeral]`): pods may declare a
     * bucket in their own `csi:` volume, read with their own Secret. The field is immutable: a
     * change needs the CSIDriver deleted first (volumes already mounted are not affected).
     */
    inlineVolumes: boolean;
  };
  /**
   * `authenticationSource: pod`: kubelet hands the node plugin a token of the workload's
   * ServiceAccount for this audience (CSIDriver `tokenRequests`), exchanged with STS for the
   * role's credentials. Empty audience: no tokens are requested (pod identity off).
   */
  podIdentity: {
    /** The OIDC provider's client id (AWS: `sts.amazonaws.com`). */
    audience: string;
    /** Lifetime of the tokens kubelet requests (at least 600; kubelet renews at 80 %). */
    tokenExpirationSeconds: number;
  };
  /** Node plugin DaemonSet settings. */
  node: {
    /** Kubelet root directory on the hosts. */
    kubeletPath: string;
    logLevel: "trace" | "debug" | "info" | "warning" | "error" | "fatal";
    /** Prometheus port of the node plugin (0: off). */
    metricsPort: number;
    /** Port of the livenessprobe sidecar (the node plugin's /healthz). */
    healthPort: number;
    /** Port of the registrar's /healthz. */
    registrarHealthPort: number;
    resources: ResourceValues;
    nodeSelector: Record<string, string>;
    /** Tolerate every taint (the plugin then runs on every node). */
    tolerateAllTaints: boolean;
    /** CriticalAddonsOnly, the agent-not-ready startup taint, NoExecute for 300 s. */
    defaultTolerations: boolean;
    tolerations: TolerationValues[];
    /** More node plugin settings by flag name (see `s3-csi-node --help`), e.g. `read-ahead-kb`. */
    settings: Record<string, string>;
    /**
     * Admission policy (ValidatingAdmissionPolicy) limiting the node plugin's ServiceAccount to
     * removing the agent-not-ready taint from its own Node (RBAC alone can only grant patch on
     * every Node). Needs bound ServiceAccount tokens that carry the node name (Kubernetes ≥ 1.30
     * default); turn off only where those are disabled.
     */
    restrictNodeUpdates: boolean;
  };
  /**
   * Admission policies (ValidatingAdmissionPolicy, CEL, no webhook) that refuse at `kubectl apply`
   * a PersistentVolume of this driver, or a StorageClass that provisions with it, whose mount
   * options, volume attributes or parameters the node plugin or the provisioner would refuse —
   * with the same message (src/deploy/render_volume_policy.ts).
   */
  validateVolumes: boolean;
  /** Controller Deployment settings. */
  controller: {
    replicas: number;
    logLevel: "trace" | "debug" | "info" | "warning" | "error" | "fatal";
    /** Port of /metrics, /healthz, /readyz. */
    metricsPort: number;
    resources: ResourceValues;
    nodeSelector: Record<string, string>;
    tolerations: TolerationValues[];
    /** More controller settings by flag name (see `s3-csi-controller --help`). */
    settings: Record<string, string>;
    /**
     * With headroom on, the controller may patch pods in every namespace (to pin a workload that
     * opted in and remove its scheduling gate): an admission policy (ValidatingAdmissionPolicy,
     * Kubernetes ≥ 1.30) limits it to exactly that. Turn off only where such policies are not served.
     */
    restrictPodUpdates: boolean;
  };
  /**
   * Dynamic provisioning: its own Deployment (`s3-csi-provisioner`) and ServiceAccount, holding the
   * csi-provisioner sidecar and the driver's CSI Controller service (which has no API access).
   * Scheduling (node selector, tolerations) follows `controller`.
   */
  provisioner: {
    enabled: boolean;
    replicas: number;
    /** Port of the sidecar's /healthz/leader-election and metrics. */
    httpPort: number;
    /** Deadline of each CreateVolume/DeleteVolume call (bucket creation). */
    timeout: string;
    resources: ResourceValues;
  };
  /** Resources of the node sidecars (registrar, livenessprobe). */
  sidecars: { resources: ResourceValues };
  /**
   * Mountpoint Pods: namespace, priority classes, uid, command, resources, local disk. The node
   * plugin gets the image, command and uid too: it refuses a pod that differs (someone else's pod
   * under the expected name).
   */
  mountpointPod: {
    /** Namespace of the Mountpoint Pods; created by the deployment. */
    namespace: string;
    /**
     * PriorityClasses of Mountpoint Pods: created by the deployment and, by an admission policy,
     * usable only by pods of the driver's two namespaces.
     */
    priorityClassName: string;
    /**
     * Headroom (`src/controller/headroom.ts`) is on when both classes and the image are set: the
     * Mountpoint Pods of workloads with the scheduling gate `s3.csi.scality.com/reserve-headroom-for-mppod`
     * get the preempting class, their headroom pods the headroom class and image. "" turns it off
     * (and nothing of it is rendered).
     */
    preemptingPriorityClassName: string;
    headroomPriorityClassName: string;
    /** Pause image of headroom pods. */
    headroomImage: string;
    /** Non-root uid/gid of the Mountpoint container. */
    uid: number;
    /** Entrypoint of the Mountpoint container (in the mounter image). */
    command: string;
    resources: ResourceValues;
    /**
     * Size limit of each Mountpoint Pod's `work` emptyDir on the node's disk: the engine's HOME,
     * rclone's files (its cache when the volume has no cache volume), the engine's session table
     * (about 100 bytes per inode the kernel knows). Past it the kubelet evicts the pod.
     */
    workSizeLimit: string;
    /**
     * Size limit of a disk emptyDir cache whose PV names none (the deprecated `cache` mount
     * option, or `cache: emptyDir` without `cacheEmptyDirSizeLimit`); the engine keeps its cache
     * within 95 % of it. The container's `ephemeral-storage` limit is the work and cache limits
     * plus 128Mi for its logs.
     */
    cacheSizeLimit: string;
    /**
     * Admission policy: in the Mountpoint namespace only the controller's ServiceAccount may
     * create pods, and nobody else may change a pod's spec (Mountpoint Pod names are known in
     * advance; the node plugin hands such a pod a FUSE connection and the volume's keys).
     * Needs ValidatingAdmissionPolicy (Kubernetes ≥ 1.30).
     */
    restrictPodCreation: boolean;
    /**
     * Admission policy: pods outside the driver's namespace and the Mountpoint namespace may not
     * use the Mountpoint PriorityClasses (to jump the queue or preempt others).
     */
    restrictPriorityClasses: boolean;
    /**
     * Port where each Mountpoint Pod's engine serves its volume's Prometheus metrics (labelled by
     * volume and pod), with a headless Service `s3-csi-mountpoint-metrics` selecting them; 0: off.
     */
    metricsPort: number;
    /**
     * A PodDisruptionBudget that refuses evicting a Mountpoint Pod while a workload uses it (node
     * drain evicts the workloads first; the Mountpoint Pods leave once released).
     */
    disruptionBudget: boolean;
  };
  /** Custom CA for the S3 endpoint. */
  tls: {
    /** ConfigMap with key `ca-bundle.crt` (in both namespaces); "" disables. */
    caCertConfigMap: string;
    /** PEM data; when set, the deployment creates the ConfigMaps itself. */
    caCertData: string;
  };
  /**
   * Outbound proxy for S3: the controller's `--s3-proxy` (https proxy, else http), and the standard
   * `HTTP(S)_PROXY`/`NO_PROXY` variables in the node plugin, which has no proxy setting.
   */
  proxy: { httpProxy: string; httpsProxy: string; noProxy: string };
}

/** Resources with a request and a memory limit. */
function res(cpu: string, memory: string, memoryLimit: string): ResourceValues {
  return { requests: { cpu, memory }, limits: { memory: memoryLimit } };
}

/** The documented defaults. A fresh copy on each call. */
export function defaultValues(): DeployValues {
  return {
    version: DRIVER_VERSION,
    namespace: "kube-system",
    customLabels: {},
    imagePullSecrets: [],
    image: {
      registry: "ghcr.io/scality",
      tag: DRIVER_VERSION,
      pullPolicy: "IfNotPresent",
      node: "",
      controller: "",
      mounter: "",
      nodeDriverRegistrar: "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0",
      livenessProbe: "registry.k8s.io/sig-storage/livenessprobe:v2.19.0",
      csiProvisioner: "registry.k8s.io/sig-storage/csi-provisioner:v5.3.0",
    },
    s3: { endpointUrl: "", region: "us-east-1" },
    s3CredentialSecret: {
      name: "s3-secret",
      accessKeyId: "access_key_id",
      secretAccessKey: "secret_access_key",
      sessionToken: "session_token",
    },
    csiDriver: { fsGroupPolicy: "File", requiresRepublish: true, inlineVolumes: true },
    podIdentity: { audience: "sts.amazonaws.com", tokenExpirationSeconds: 3600 },
    node: {
      kubeletPath: DEFAULT_KUBELET_ROOT,
      logLevel: "info",
      metricsPort: 0,
      healthPort: 9808,
      registrarHealthPort: 9809,
      resources: res("10m", "64Mi", "256Mi"),
      nodeSelector: {},
      tolerateAllTaints: false,
      defaultTolerations: true,
      tolerations: [],
      settings: {},
      restrictNodeUpdates: true,
    },
    validateVolumes: true,
    controller: {
      replicas: 1,
      logLevel: "info",
      metricsPort: 8080,
      resources: res("10m", "64Mi", "256Mi"),
      nodeSelector: {},
      tolerations: [],
      settings: {},
      restrictPodUpdates: true,
    },
    provisioner: {
      enabled: true,
      replicas: 1,
      httpPort: 8081,
      timeout: "60s",
      resources: res("10m", "32Mi", "128Mi"),
    },
    sidecars: { resources: res("5m", "16Mi", "64Mi") },
    mountpointPod: {
      namespace: DEFAULT_MOUNTPOINT_NAMESPACE,
      priorityClassName: "mount-s3-critical",
      preemptingPriorityClassName: "mount-s3-preempting",
      headroomPriorityClassName: "mount-s3-headroom",
      uid: DEFAULT_MOUNTPOINT_UID,
      command: DEFAULT_MOUNTPOINT_COMMAND,
      resources: { requests: { cpu: "50m", memory: "64Mi" }, limits: {} },
      workSizeLimit: DEFAULT_WORK_SIZE_LIMIT,
      cacheSizeLimit: DEFAULT_CACHE_SIZE_LIMIT,
      restrictPodCreation: true,
      restrictPriorityClasses: true,
      metricsPort: 9102,
      headroomImage: "registry.k8s.io/pause:3.10",
      disruptionBudget: true,
    },
    tls: { caCertConfigMap: "", caCertData: "" },
    proxy: { httpProxy: "", httpsProxy: "", noProxy: "" },
  };
}

/** True when the values turn headroom on (both priority classes and the image set). */
export function headroomOn(v: DeployValues): boolean {
  const m = v.mountpointPod;
  return Boolean(m.preemptingPriorityClassName && m.headroomPriorityClassName && m.headroomImage);
}

/** Image reference of a driver component, derived from registry and tag unless set. */
export function driverImage(v: DeployValues, name: "node" | "controller" | "mounter"): string {
  return v.image[name] || `${v.image.registry.replace(/\/+$/, "")}/s3-csi-${name}:${v.image.tag}`;
}
