/**
 * The admission policy that narrows the node plugin's one write permission. RBAC can only grant
 * `patch` on every Node (`resourceNames` cannot name "my own node"), and NodeRestriction protects
 * kubelet identities only. This ValidatingAdmissionPolicy (CEL, GA since Kubernetes 1.30) applies
 * to requests of the node plugin's ServiceAccount and allows an update of a Node only when
 *
 * - the Node is the one the request's pod runs on: bound ServiceAccount tokens carry the node name
 *   (`authentication.kubernetes.io/node-name` in the user's extra info, on by default since 1.30),
 *   so a token stolen from one node cannot touch another;
 * - the update only removes the startup taint `s3.csi.scality.com/agent-not-ready` — no other taint
 *   is added or removed, and labels, annotations, finalizers, owners and `spec.unschedulable` are
 *   unchanged.
 *
 * What stays: RBAC `get` on every Node (names, labels and addresses are readable). See ADR 0010.
 *
 * @module
 */
import { TAINT_AGENT_NOT_READY } from "../mppod/labels.ts";
import {
  admissionPolicy,
  resourceRule,
  serviceAccountUser,
  unchanged,
} from "./admission_policy.ts";
import type { Manifest } from "./k8s_objects.ts";
import { commonLabels, NODE_POLICY, NODE_SERVICE_ACCOUNT } from "./names.ts";
import type { DeployValues } from "./values.ts";

/** The user-info key of bound ServiceAccount tokens that names the pod's node. */
export const NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name";

function nodeMessage(): string {
  return "variables.nodeName == '' ? " +
    `'the S3 CSI node plugin may only update its own Node, and its token names no node (bound ServiceAccount tokens carry ${NODE_NAME_EXTRA} since Kubernetes 1.30)' : ` +
    "'the S3 CSI node plugin on ' + variables.nodeName + ' may not update Node ' + object.metadata.name";
}

/** The policy and its binding, when `node.restrictNodeUpdates` is on. */
export function renderNodePolicy(v: DeployValues): Manifest[] {
  if (!v.node.restrictNodeUpdates) return [];
  const user = serviceAccountUser(v.namespace, NODE_SERVICE_ACCOUNT);
  const taint = TAINT_AGENT_NOT_READY;
  const sameTaint = "o.key == t.key && o.effect == t.effect && " +
    "(has(o.value) ? o.value : '') == (has(t.value) ? t.value : '')";
  return admissionPolicy({
    name: NODE_POLICY,
    labels: commonLabels(v, "node"),
    spec: {
      matchConstraints: { resourceRules: [resourceRule("", ["nodes"], ["UPDATE"])] },
      matchConditions: [{
        name: "s3-csi-node-plugin",
        expression: `request.userInfo.username == '${user}'`,
      }],
      variables: [
        {
          name: "nodeName",
          expression:
            `'${NODE_NAME_EXTRA}' in request.userInfo.extra && size(request.userInfo.extra['${NODE_NAME_EXTRA}']) > 0 ? request.userInfo.extra['${NODE_NAME_EXTRA}'][0] : ''`,
        },
        {
          name: "oldTaints",
          expression: "has(oldObject.spec.taints) ? oldObject.spec.taints : []",
        },
        { name: "newTaints", expression: "has(object.spec.taints) ? object.spec.taints : []" },
      ],
      validations: [
        {
          expression: "variables.nodeName != '' && object.metadata.name == variables.nodeName",
          messageExpression: nodeMessage(),
          reason: "Forbidden",
        },
        {
          expression:
            `variables.newTaints.all(t, variables.oldTaints.exists(o, ${sameTaint})) && variables.oldTaints.all(o, o.key == '${taint}' || variables.newTaints.exists(t, ${sameTaint}))`,
          message: `the S3 CSI node plugin may only remove the taint ${taint} from its Node`,
          reason: "Forbidden",
        },
        {
          expression: [
            "metadata.labels",
            "metadata.annotations",
            "metadata.finalizers",
            "metadata.ownerReferences",
            "spec.unschedulable",
          ].map(unchanged).join(" && "),
          message:
            "the S3 CSI node plugin may not change a Node's labels, annotations, finalizers, owners or unschedulable",
          reason: "Forbidden",
        },
      ],
    },
  });
}
