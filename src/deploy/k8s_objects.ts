/**
 * Shapes of the Kubernetes objects the deployment renders, as far as the renderer and the tests
 * read them. Objects are plain JSON; these types only keep the renderer honest.
 *
 * @module
 */

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

/** A container environment variable. */
export interface EnvVar {
  /** Name. */
  name: string;
  /** Literal value. */
  value?: string;
  /** Downward API field or Secret key. */
  valueFrom?:
    | { fieldRef: { fieldPath: string } }
    | { secretKeyRef: { name: string; key: string; optional: boolean } };
}

/** A container volume mount. */
export interface VolumeMount {
  /** Name. */
  name: string;
  /** Path in the container. */
  mountPath: string;
  /** Mount read-only. */
  readOnly?: boolean;
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

/** The container fields the renderer sets. */
export interface Container {
  /** Name. */
  name: string;
  /** Image reference. */
  image: string;
  /** Pull policy. */
  imagePullPolicy: string;
  /** Command-line arguments. */
  args?: string[];
  /** Environment variables. */
  env?: EnvVar[];
  /** Named container ports. */
  ports?: { name: string; containerPort: number; protocol?: string }[];
  /** Volume mounts. */
  volumeMounts?: VolumeMount[];
  /** Requests and limits. */
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  /** Restart the container when it fails. */
  livenessProbe?: Probe;
  /** Ready for traffic/rollout when it passes. */
  readinessProbe?: Probe;
  /** Container security context. */
  securityContext: Record<string, unknown>;
}

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
