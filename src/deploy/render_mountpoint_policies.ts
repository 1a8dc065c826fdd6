/**
 * Admission policies (ValidatingAdmissionPolicy, CEL, GA since Kubernetes 1.30) around Mountpoint
 * Pods, rendered with the manifests like the node policy (`render_node_policy.ts`):
 *
 * - **Mountpoint Pods only from the controller** (`mountpointPod.restrictPodCreation`). Mountpoint
 *   Pod names are deterministic and the node plugin hands the pod of that name a FUSE connection
 *   and the volume's keys: whoever else could create a pod in the Mountpoint namespace could take
 *   them. In that namespace only the controller's ServiceAccount may create pods; nobody else may
 *   change a pod's spec (its image is mutable) or add an ephemeral container; labels and
 *   annotations stay open (`kubectl annotate … no-new-workload`). The node plugin checks the pod
 *   itself too (`node/pod_invariants.ts`).
 * - **The Mountpoint PriorityClasses only for the driver** (`mountpointPod.restrictPriorityClasses`).
 *   `mount-s3-critical` (priority 1e9) and its siblings would let any tenant jump the scheduling
 *   queue or preempt others: a pod outside the driver's namespace and the Mountpoint namespace may
 *   not name them.
 *
 * @module
 */
import { admissionPolicy, resourceRule, serviceAccountUser } from "./admission_policy.ts";
import { celString as cel } from "./cel.ts";
import type { Manifest } from "./k8s_objects.ts";
import {
  commonLabels,
  CONTROLLER_SERVICE_ACCOUNT,
  MOUNTPOINT_POD_POLICY,
  PRIORITY_CLASS_POLICY,
} from "./names.ts";
import type { DeployValues } from "./values.ts";

/** The label every namespace has with its own name (Kubernetes ≥ 1.21). */
const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";

function policy(name: string, v: DeployValues, spec: Record<string, unknown>): Manifest[] {
  return admissionPolicy({ name, labels: commonLabels(v, "mountpoint-pods"), spec });
}

/** The controller's user name (its ServiceAccount). */
export function controllerUser(v: DeployValues): string {
  return serviceAccountUser(v.namespace, CONTROLLER_SERVICE_ACCOUNT);
}

/** Pods in the Mountpoint namespace: created only by the controller. */
function mountpointPodPolicy(v: DeployValues): Manifest[] {
  const ns = v.mountpointPod.namespace;
  const user = controllerUser(v);
  const why =
    "Mountpoint Pod names are known in advance and the S3 CSI node plugin hands such a pod a FUSE connection and the volume's credentials";
  return policy(MOUNTPOINT_POD_POLICY, v, {
    matchConstraints: {
      namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: ns } },
      resourceRules: [
        resourceRule("", ["pods", "pods/ephemeralcontainers"], ["CREATE", "UPDATE"]),
      ],
    },
    matchConditions: [{
      name: "not-the-s3-csi-controller",
      expression: `request.userInfo.username != ${cel(user)}`,
    }],
    // `request` is the AdmissionRequest as a map: an empty field (subResource) is absent, so it
    // is read through `sub`, never directly.
    variables: [{
      name: "sub",
      expression: "has(request.subResource) ? request.subResource : ''",
    }],
    validations: [
      {
        expression: "request.operation != 'CREATE'",
        messageExpression: cel(
          `only the S3 CSI controller (${user}) may create pods in namespace ${ns}: ${why}; refused for `,
        ) + " + request.userInfo.username",
        reason: "Forbidden",
      },
      {
        expression: "variables.sub != 'ephemeralcontainers'",
        message: `ephemeral containers may not be added to pods in namespace ${ns}: ${why}`,
        reason: "Forbidden",
      },
      {
        expression:
          "request.operation != 'UPDATE' || variables.sub != '' || object.spec == oldObject.spec",
        message:
          `only the S3 CSI controller may change the spec (e.g. the image) of pods in namespace ${ns}: ${why}`,
        reason: "Forbidden",
      },
    ],
  });
}

/** The Mountpoint PriorityClasses: only in the driver's namespaces. */
function priorityClassPolicy(v: DeployValues): Manifest[] {
  const m = v.mountpointPod;
  const classes = [m.priorityClassName, m.preemptingPriorityClassName, m.headroomPriorityClassName]
    .filter(Boolean);
  const namespaces = [...new Set([v.namespace, m.namespace])];
  const list = `[${classes.map(cel).join(", ")}]`;
  return policy(PRIORITY_CLASS_POLICY, v, {
    matchConstraints: {
      namespaceSelector: {
        matchExpressions: [{ key: NAMESPACE_NAME_LABEL, operator: "NotIn", values: namespaces }],
      },
      resourceRules: [resourceRule("", ["pods"], ["CREATE"])],
    },
    matchConditions: [{
      name: "names-a-mountpoint-priority-class",
      expression: `has(object.spec.priorityClassName) && object.spec.priorityClassName in ${list}`,
    }],
    validations: [{
      expression: `!(object.spec.priorityClassName in ${list})`,
      messageExpression: "'PriorityClass ' + object.spec.priorityClassName + " + cel(
        ` is reserved for the S3 CSI driver's Mountpoint Pods (namespaces ${
          namespaces.join(", ")
        }): pods of namespace `,
      ) + " + request.namespace + ' may not use it'",
      reason: "Forbidden",
    }],
  });
}

/** The policies and their bindings, each unless turned off in the values. */
export function renderMountpointPolicies(v: DeployValues): Manifest[] {
  return [
    ...(v.mountpointPod.restrictPodCreation ? mountpointPodPolicy(v) : []),
    ...(v.mountpointPod.restrictPriorityClasses ? priorityClassPolicy(v) : []),
  ];
}
