/**
 * Labels, annotations and taints that cross process boundaries. Each constant says who writes it
 * and who reads it. All keys are prefixed with the driver name.
 *
 * @module
 */
import { DRIVER_NAME } from "../util/version.ts";

/** Default namespace of Mountpoint Pods (controller flag `--mountpoint-namespace`). */
export const DEFAULT_MOUNTPOINT_NAMESPACE = "mount-s3";

/**
 * Annotation `needs-unmount: "true"` on a Mountpoint Pod.
 * Writer: controller, when the last workload left. Reader: node plugin's unmounter, which then
 * writes `mount.exit`, unmounts the source and cleans credentials; the controller assigns no new
 * workload to such a pod.
 */
export const ANNOTATION_NEEDS_UNMOUNT = `${DRIVER_NAME}/needs-unmount`;

/**
 * Label `needs-unmount: "true"` on a Mountpoint Pod, set together with
 * {@link ANNOTATION_NEEDS_UNMOUNT}. Writer: controller. Reader: the PodDisruptionBudget of
 * Mountpoint Pods (`render_cluster.ts`), which selects only pods without it: a pod in use cannot be
 * evicted (node drain waits for its workloads to go), a released one can.
 */
export const LABEL_NEEDS_UNMOUNT = `${DRIVER_NAME}/needs-unmount`;

/**
 * Annotation `no-new-workload: "true"` on a Mountpoint Pod.
 * Writer: an operator (kubectl annotate). Reader: controller, which keeps existing workloads on the
 * pod but assigns new ones to a new Mountpoint Pod (e.g. to roll a new engine version).
 */
export const ANNOTATION_NO_NEW_WORKLOAD = `${DRIVER_NAME}/no-new-workload`;

/**
 * Annotation with the PV name on a Mountpoint Pod (an annotation, not a label: PV names may be
 * longer than the 63 characters a label value allows). Writer: controller. Reader: node plugin,
 * operators.
 */
export const ANNOTATION_VOLUME_NAME = `${DRIVER_NAME}/volume-name`;

/** Annotation with the PV's volume handle on a Mountpoint Pod. Writer: controller. Reader: node plugin (credential clean-up). */
export const ANNOTATION_VOLUME_ID = `${DRIVER_NAME}/volume-id`;

/**
 * Annotation on a Mountpoint Pod the node plugin gave up on, saying why (one line, at most 1 KiB):
 * its engine keeps dying, or its mount kept needing repair. Writer: node plugin. Reader: controller,
 * which records the reason as an Event on each workload of the pod and replaces the pod.
 */
export const ANNOTATION_BROKEN = `${DRIVER_NAME}/broken`;

/** Annotation naming the S3PA a Mountpoint Pod belongs to. Writer: controller. Reader: controller, operators. */
export const ANNOTATION_ATTACHMENT = `${DRIVER_NAME}/attachment`;

/**
 * Label with the driver version on Mountpoint Pods and S3PAs.
 * Writer: controller. Reader: controller (version-aware sharing: a pod created by another driver
 * version takes no new workloads).
 */
export const LABEL_DRIVER_VERSION = `${DRIVER_NAME}/mounted-by-csi-driver-version`;

/** Label with the Mountpoint (engine) version on Mountpoint Pods. Writer: controller. Reader: operators. */
export const LABEL_MOUNTPOINT_VERSION = `${DRIVER_NAME}/mountpoint-version`;

/**
 * Label `component: mountpoint-pod` marking Mountpoint Pods.
 * Writer: controller. Reader: node plugin (its pod watch selects on it), kubelet emulator, operators.
 */
export const LABEL_COMPONENT = `${DRIVER_NAME}/component`;
/** Value of {@link LABEL_COMPONENT} on Mountpoint Pods. */
export const COMPONENT_MOUNTPOINT_POD = "mountpoint-pod";

/**
 * Scheduling gate `reserve-headroom-for-mppod` on a workload pod: the workload opts in to headroom.
 * Writer: the user (in the pod template). Reader and remover: the controller, which first reserves
 * room for the workload and its Mountpoint Pods on one node with headroom pods, then pins the
 * workload to that node and removes the gate (`src/controller/headroom.ts`).
 */
export const GATE_RESERVE_HEADROOM = `${DRIVER_NAME}/reserve-headroom-for-mppod`;

/** Value of {@link LABEL_COMPONENT} on headroom pods (in the Mountpoint namespace). */
export const COMPONENT_HEADROOM_POD = "headroom-pod";

/** Label with the UID of the workload a headroom pod reserves room for. Writer and reader: controller. */
export const LABEL_HEADROOM_FOR = `${DRIVER_NAME}/headroom-for-workload`;

/**
 * Label with the role of a headroom pod: `placement` (room for the workload and its Mountpoint
 * Pods, placed by the scheduler like the workload) or `mountpoint` (room for the Mountpoint Pods,
 * on the node the workload was pinned to; they preempt it). Writer and reader: controller.
 */
export const LABEL_HEADROOM_ROLE = `${DRIVER_NAME}/headroom-role`;

/** The string value used by boolean annotations. */
export const TRUE = "true";

/**
 * Node taint removed by the node plugin once it is ready to publish volumes.
 * Writer: the cluster operator (node bootstrap) adds it; node plugin removes it. Reader: scheduler.
 */
export const TAINT_AGENT_NOT_READY = `${DRIVER_NAME}/agent-not-ready`;

/** True when the annotation `key` is set to "true" on an object's annotations. */
export function isAnnotatedTrue(
  annotations: Readonly<Record<string, string>> | undefined,
  key: string,
): boolean {
  return annotations?.[key] === TRUE;
}

/**
 * ServiceAccount annotation naming the role the workloads of that account assume with
 * `authenticationSource: pod` (unless the volume's `roleArn` attribute names one).
 * Writer: users. Reader: the controller (into the S3PA).
 */
export const ANNOTATION_ROLE_ARN = `${DRIVER_NAME}/role-arn`;
