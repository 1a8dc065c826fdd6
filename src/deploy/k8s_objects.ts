/**
 * Shapes of the Kubernetes objects the deployment renders, as far as the renderer and the tests
 * read them. Objects are plain JSON; these types only keep the renderer honest.
 *
 * @module
 */

/** A rendered object. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** A container environment variable. */
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?:
    | { fieldRef: { fieldPath: string } }
    | { secretKeyRef: { name: string; key: string; optional: boolean } };
}

/** A container volume mount. */
export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  mountPropagation?: "None" | "HostToContainer" | "Bidirectional";
}

/** An HTTP, TCP or exec probe. */
export interface Probe {
  httpGet?: { path: string; port: string | number };
  tcpSocket?: { port: string | number };
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}

/** The container fields the renderer sets. */
export interface Container {
  name: string;
  image: string;
  imagePullPolicy: string;
  args?: string[];
  env?: EnvVar[];
  ports?: { name: string; containerPort: number; protocol?: string }[];
  volumeMounts?: VolumeMount[];
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  securityContext: Record<string, unknown>;
}

/** A pod volume. */
export interface Volume {
  name: string;
  hostPath?: { path: string; type: string };
  emptyDir?: Record<string, unknown>;
  configMap?: { name: string; optional?: boolean };
}

/** An RBAC policy rule. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}
