/**
 * The slices of built-in Kubernetes objects this project reads and writes, as they travel on the
 * wire (timestamps are RFC 3339 strings). Fields not listed are preserved untouched because objects
 * are passed through as JSON.
 *
 * @module
 */
import type { KubeObject, ObjectMeta } from "./client.ts";

/** A container (the fields we use). */
export interface Container {
  name: string;
  image?: string;
  imagePullPolicy?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
  securityContext?: Record<string, unknown>;
  [k: string]: unknown;
}

/** A pod volume (the sources we use). */
export interface PodVolume {
  name: string;
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean };
  emptyDir?: { medium?: string; sizeLimit?: string };
  configMap?: { name: string; items?: { key: string; path: string }[] };
  csi?: { driver: string; volumeAttributes?: Record<string, string>; readOnly?: boolean };
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
    securityContext?: {
      fsGroup?: number;
      runAsUser?: number;
      runAsGroup?: number;
      [k: string]: unknown;
    };
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
