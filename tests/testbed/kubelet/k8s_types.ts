/**
 * The parts of core/v1 and storage/v1 objects that the kubelet emulator, scheduler and volume
 * binder read or write. Every field is optional: objects come from the API as JSON.
 *
 * @module
 */
import type { KubeObject, ObjectMeta } from "../../../src/kube/client.ts";
import type { Container, SecurityContext } from "../../../src/kube/types.ts";
export type { Container, EnvVar, EnvVarSource, SecurityContext } from "../../../src/kube/types.ts";

/** `spec.volumes[]` of a Pod (the sources the emulator handles). */
export interface PodVolume {
  name: string;
  emptyDir?: { medium?: string; sizeLimit?: string };
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean };
  /** A CSI inline (ephemeral) volume. */
  csi?: {
    driver: string;
    readOnly?: boolean;
    fsType?: string;
    volumeAttributes?: Record<string, string>;
    nodePublishSecretRef?: { name: string };
  };
  [source: string]: unknown;
}

/** Pod spec. */
export interface PodSpec {
  nodeName?: string;
  schedulerName?: string;
  nodeSelector?: Record<string, string>;
  affinity?: { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: NodeSelector } };
  tolerations?: Toleration[];
  containers: Container[];
  initContainers?: Container[];
  volumes?: PodVolume[];
  restartPolicy?: "Always" | "OnFailure" | "Never";
  terminationGracePeriodSeconds?: number;
  serviceAccountName?: string;
  securityContext?: SecurityContext;
}

/** `nodeSelector` of a node affinity. */
export interface NodeSelector {
  nodeSelectorTerms?: {
    matchExpressions?: SelectorRequirement[];
    matchFields?: SelectorRequirement[];
  }[];
}

/** One requirement of a node selector term. */
export interface SelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  values?: string[];
}

/** A pod toleration. */
export interface Toleration {
  key?: string;
  operator?: "Exists" | "Equal";
  value?: string;
  effect?: string;
}

/** A node taint. */
export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

/** State of one container, as in `status.containerStatuses[].state`. */
export interface ContainerState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: {
    exitCode: number;
    signal?: number;
    reason?: string;
    message?: string;
    startedAt?: string;
    finishedAt?: string;
    containerID?: string;
  };
}

/** `status.containerStatuses[]`. */
export interface ContainerStatus {
  name: string;
  state: ContainerState;
  lastState: ContainerState;
  ready: boolean;
  started: boolean;
  restartCount: number;
  image: string;
  imageID: string;
  containerID?: string;
}

/** `status.conditions[]`. */
export interface PodCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  lastTransitionTime?: string;
}

/** Pod status as the kubelet reports it. */
export interface PodStatus {
  phase?: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
  conditions?: PodCondition[];
  hostIP?: string;
  podIP?: string;
  startTime?: string;
  containerStatuses?: ContainerStatus[];
  initContainerStatuses?: ContainerStatus[];
  qosClass?: string;
  reason?: string;
  message?: string;
}

/** A Pod. */
export interface Pod extends KubeObject {
  metadata: ObjectMeta & { name: string; namespace: string; uid: string };
  spec: PodSpec;
  status?: PodStatus;
}

/** `spec.csi` of a PersistentVolume. */
export interface CsiPersistentVolumeSource {
  driver: string;
  volumeHandle: string;
  readOnly?: boolean;
  fsType?: string;
  volumeAttributes?: Record<string, string>;
  nodePublishSecretRef?: { name: string; namespace?: string };
}

/** Reference from a PV to its claim. */
export interface ClaimRef {
  kind?: string;
  apiVersion?: string;
  namespace?: string;
  name?: string;
  uid?: string;
  resourceVersion?: string;
}

/** A PersistentVolume. */
export interface PersistentVolume extends KubeObject {
  metadata: ObjectMeta & { name: string };
  spec: {
    capacity?: Record<string, string>;
    accessModes?: string[];
    claimRef?: ClaimRef;
    persistentVolumeReclaimPolicy?: "Retain" | "Delete" | "Recycle";
    storageClassName?: string;
    volumeMode?: string;
    mountOptions?: string[];
    csi?: CsiPersistentVolumeSource;
    nodeAffinity?: { required?: NodeSelector };
  };
  status?: { phase?: string; message?: string; reason?: string };
}

/** A PersistentVolumeClaim. */
export interface PersistentVolumeClaim extends KubeObject {
  metadata: ObjectMeta & { name: string; namespace: string };
  spec: {
    accessModes?: string[];
    resources?: { requests?: Record<string, string> };
    volumeName?: string;
    storageClassName?: string | null;
    volumeMode?: string;
    selector?: { matchLabels?: Record<string, string> };
  };
  status?: { phase?: string; accessModes?: string[]; capacity?: Record<string, string> };
}

/** A Node. */
export interface Node extends KubeObject {
  metadata: ObjectMeta & { name: string };
  spec?: { taints?: Taint[]; unschedulable?: boolean };
  status?: Record<string, unknown>;
}

/** A CSIDriver (storage.k8s.io/v1). */
export interface CsiDriver extends KubeObject {
  spec?: {
    attachRequired?: boolean;
    podInfoOnMount?: boolean;
    requiresRepublish?: boolean;
    volumeLifecycleModes?: string[];
  };
}
