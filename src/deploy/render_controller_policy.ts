/**
 * The admission policy that narrows the controller's pod patches outside the Mountpoint namespace.
 * Headroom (`src/controller/headroom.ts`) needs `patch` on pods of every namespace — RBAC cannot
 * say "only pods that opted in" — to pin a workload to the node its headroom reserved and remove
 * its scheduling gate. This ValidatingAdmissionPolicy (CEL, GA since Kubernetes 1.30) applies to
 * the controller's ServiceAccount and allows an update of a pod outside the Mountpoint namespace
 * only when
 *
 * - the pod carried the gate `s3.csi.scality.com/reserve-headroom-for-mppod` (the user opted in)
 *   and the update removes it, keeping every other gate;
 * - labels, annotations, finalizers, owners, containers, init containers, tolerations, the node
 *   selector and the active deadline are unchanged (the API server itself lets a gated pod's node
 *   affinity only narrow: that is the pin).
 *
 * Rendered with headroom on and `controller.restrictPodUpdates` (default). See ADR 0010.
 *
 * @module
 */
import { GATE_RESERVE_HEADROOM } from "../mppod/labels.ts";
import {
  admissionPolicy,
  resourceRule,
  serviceAccountUser,
  unchanged,
} from "./admission_policy.ts";
import type { Manifest } from "./k8s_objects.ts";
import { commonLabels, CONTROLLER_POLICY, CONTROLLER_SERVICE_ACCOUNT } from "./names.ts";
import { type DeployValues, headroomOn } from "./values.ts";

/** The policy and its binding. */
export function renderControllerPolicy(v: DeployValues): Manifest[] {
  if (!headroomOn(v) || !v.controller.restrictPodUpdates) return [];
  const user = serviceAccountUser(v.namespace, CONTROLLER_SERVICE_ACCOUNT);
  const gate = GATE_RESERVE_HEADROOM;
  return admissionPolicy({
    name: CONTROLLER_POLICY,
    labels: commonLabels(v, "controller"),
    spec: {
      matchConstraints: { resourceRules: [resourceRule("", ["pods"], ["UPDATE"])] },
      matchConditions: [{
        name: "s3-csi-controller-outside-mountpoint-namespace",
        expression:
          `request.userInfo.username == '${user}' && object.metadata.namespace != '${v.mountpointPod.namespace}'`,
      }],
      variables: [
        {
          name: "oldGates",
          expression: "has(oldObject.spec.schedulingGates) ? oldObject.spec.schedulingGates : []",
        },
        {
          name: "newGates",
          expression: "has(object.spec.schedulingGates) ? object.spec.schedulingGates : []",
        },
      ],
      validations: [
        {
          expression: `variables.oldGates.exists(g, g.name == '${gate}') && ` +
            `!variables.newGates.exists(g, g.name == '${gate}') && ` +
            `variables.newGates == variables.oldGates.filter(g, g.name != '${gate}')`,
          message:
            `the S3 CSI controller may only remove the scheduling gate ${gate} from a pod that has it`,
          reason: "Forbidden",
        },
        {
          expression: [
            "metadata.labels",
            "metadata.annotations",
            "metadata.finalizers",
            "metadata.ownerReferences",
            "spec.containers",
            "spec.initContainers",
            "spec.tolerations",
            "spec.nodeSelector",
            "spec.activeDeadlineSeconds",
          ].map(unchanged).join(" && "),
          message:
            "the S3 CSI controller may not change a workload's labels, annotations, finalizers, owners, containers, tolerations, node selector or deadline",
          reason: "Forbidden",
        },
      ],
    },
  });
}
