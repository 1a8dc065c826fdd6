/**
 * Shapes of the Kubernetes objects the deployment renders, as far as the renderer and the tests
 * read them. Objects are plain JSON; these types only keep the renderer honest.
 *
 * @module
 */
import type {
  Container as KubeContainer,
  ResourceRequirements,
  SecurityContext,
} from "../kube/types.ts";
export type { EnvVar, Probe, VolumeMount } from "../kube/types.ts";

/** A rendered object. */
export interface Manifest {
  /** API group/version. */
  apiVersion: string;
  /** Object kind. */
  kind: string;
  /** Name, namespace, labels, annotations. */
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  /** Any other field of the object. */
  [field: string]: unknown;
}

/** The container fields the renderer always sets. */
export type Container = KubeContainer & {
  image: string;
  imagePullPolicy: string;
  resources: ResourceRequirements;
  securityContext: SecurityContext;
};

/** A pod volume. */
export interface Volume {
  /** Name. */
  name: string;
  /** Host directory or device. */
  hostPath?: { path: string; type: string };
  /** Scratch volume. */
  emptyDir?: Record<string, unknown>;
  /** ConfigMap volume. */
  configMap?: { name: string; optional?: boolean };
  /** Projected volume (a ServiceAccount token with its CA and namespace). */
  projected?: { defaultMode?: number; sources: Record<string, unknown>[] };
}

/** An RBAC policy rule. */
export interface PolicyRule {
  /** API groups. */
  apiGroups: string[];
  /** Requests and limits. */
  resources: string[];
  /** Allowed verbs. */
  verbs: string[];
  /** Restrict to these object names. */
  resourceNames?: string[];
}
