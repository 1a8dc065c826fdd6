/**
 * The slices of built-in Kubernetes objects this project reads and writes, as they travel on the
 * wire (timestamps are RFC 3339 strings). Fields not listed are preserved untouched because objects
 * are passed through as JSON.
 *
 * @module
 */
import type { KubeObject, ObjectMeta } from "./client.ts";

/** `env[].valueFrom` of a container. */
export interface EnvVarSource {
  /** Downward API field. */
  fieldRef?: { fieldPath: string; apiVersion?: string };
  /** A key of a Secret. */
  secretKeyRef?: { name: string; key: string; optional?: boolean };
  /** A key of a ConfigMap. */
  configMapKeyRef?: { name: string; key: string; optional?: boolean };
}

/** `env[]` of a container. */
export interface EnvVar {
  name: string;
  /** Literal value. */
  value?: string;
  /** Downward API field, Secret or ConfigMap key. */
  valueFrom?: EnvVarSource;
}

/** A container volume mount. */
export interface VolumeMount {
  name: string;
  /** Path in the container. */
  mountPath: string;
  readOnly?: boolean;
  subPath?: string;
  /** Mount propagation mode. */
  mountPropagation?: "None" | "HostToContainer" | "Bidirectional";
}

/** An HTTP, TCP or exec probe. */
export interface Probe {
  /** HTTP GET probe. */
  httpGet?: { path: string; port: string | number };
  /** TCP connect probe. */
  tcpSocket?: { port: string | number };
  /** Delay before the first probe. */
  initialDelaySeconds?: number;
  /** Probe period. */
  periodSeconds?: number;
  /** Probe timeout. */
  timeoutSeconds?: number;
  /** Failures before the probe fails. */
  failureThreshold?: number;
}

/** Pod- or container-level security context. */
export interface SecurityContext {
  runAsUser?: number;
  runAsGroup?: number;
  runAsNonRoot?: boolean;
  fsGroup?: number;
  supplementalGroups?: number[];
  allowPrivilegeEscalation?: boolean;
  privileged?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type: string; localhostProfile?: string };
  [k: string]: unknown;
}

/** Requests and limits of a container. */
export interface ResourceRequirements {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

/** A container of a Pod. */
export interface Container {
  name: string;
  image?: string;
  imagePullPolicy?: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: EnvVar[];
  /** Named container ports. */
  ports?: { name: string; containerPort: number; protocol?: string }[];
  volumeMounts?: VolumeMount[];
  resources?: ResourceRequirements;
  /** Restart the container when it fails. */
  livenessProbe?: Probe;
  /** Ready for traffic/rollout when it passes. */
  readinessProbe?: Probe;
  securityContext?: SecurityContext;
  [k: string]: unknown;
}

/** A pod volume (the sources we use). */
export interface PodVolume {
  name: string;
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean };
  emptyDir?: { medium?: string; sizeLimit?: string };
  configMap?: { name: string; items?: { key: string; path: string }[] };
  csi?: {
    driver: string;
    volumeAttributes?: Record<string, string>;
    readOnly?: boolean;
    fsType?: string;
    /** Secret in the pod's own namespace. */
    nodePublishSecretRef?: { name: string };
  };
  [k: string]: unknown;
}

/** A Pod. */
export interface Pod extends KubeObject {
  metadata: ObjectMeta;
  spec: {
    nodeName?: string;
    containers: Container[];
    initContainers?: Container[];
    volumes?: PodVolume[];
    restartPolicy?: string;
    serviceAccountName?: string;
    priorityClassName?: string;
    terminationGracePeriodSeconds?: number;
    securityContext?: SecurityContext;
    tolerations?: unknown[];
    affinity?: unknown;
    nodeSelector?: Record<string, string>;
    [k: string]: unknown;
  };
  status?: {
    phase?: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
    reason?: string;
    message?: string;
    startTime?: string;
    conditions?: { type: string; status: string; [k: string]: unknown }[];
    containerStatuses?: {
      name: string;
      ready?: boolean;
      restartCount?: number;
      state?: Record<string, unknown>;
      lastState?: Record<string, unknown>;
      [k: string]: unknown;
    }[];
    [k: string]: unknown;
  };
}

/** A PersistentVolumeClaim. */
export interface PersistentVolumeClaim extends KubeObject {
  metadata: ObjectMeta;
  spec: {
    volumeName?: string;
    storageClassName?: string;
    accessModes?: string[];
    resources?: { requests?: Record<string, string> };
    [k: string]: unknown;
  };
  status?: { phase?: "Pending" | "Bound" | "Lost"; [k: string]: unknown };
}

/** The CSI source of a PersistentVolume. */
export interface CsiPersistentVolumeSource {
  driver: string;
  volumeHandle: string;
  readOnly?: boolean;
  volumeAttributes?: Record<string, string>;
  nodePublishSecretRef?: { name: string; namespace: string };
  [k: string]: unknown;
}

/** A ServiceAccount (what the controller reads: its annotations). */
export interface ServiceAccount extends KubeObject {
  metadata: ObjectMeta;
}

/** A PersistentVolume. */
export interface PersistentVolume extends KubeObject {
  metadata: ObjectMeta;
  spec: {
    csi?: CsiPersistentVolumeSource;
    mountOptions?: string[];
    accessModes?: string[];
    capacity?: Record<string, string>;
    claimRef?: { name?: string; namespace?: string; uid?: string; [k: string]: unknown };
    persistentVolumeReclaimPolicy?: string;
    storageClassName?: string;
    [k: string]: unknown;
  };
  status?: { phase?: string; [k: string]: unknown };
}

/** A Node. */
export interface Node extends KubeObject {
  metadata: ObjectMeta;
  spec?: { taints?: { key: string; value?: string; effect: string }[]; [k: string]: unknown };
  status?: Record<string, unknown>;
}

/** A coordination.k8s.io/v1 Lease. */
export interface Lease extends KubeObject {
  metadata: ObjectMeta;
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** True when the pod reached a terminal phase. */
export function isTerminal(pod: Pod): boolean {
  return pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
}
