/**
 * Headroom pods and the workload patch of the headroom flow (`headroom.ts`), as pure functions.
 *
 * - The **placement** pod reserves, on one node, room for the workload and its Mountpoint Pods: it
 *   requests both and carries the workload's node selector, node affinity and tolerations, so the
 *   scheduler puts it only on a node where the workload could go and where there is room for all.
 * - The **mountpoint** pod reserves the Mountpoint Pods' room on the node the workload is pinned to;
 *   the Mountpoint Pods (preempting priority class) preempt it.
 *
 * Both run the pause image at the headroom priority class (negative, `preemptionPolicy: Never`),
 * restricted like Mountpoint Pods (the Mountpoint namespace enforces the restricted Pod Security
 * Standard), without service-account token or grace period.
 *
 * @module
 */
import type { Pod } from "../kube/types.ts";
import { parseQuantity } from "../kube/quantity.ts";
import {
  COMPONENT_HEADROOM_POD,
  GATE_RESERVE_HEADROOM,
  LABEL_COMPONENT,
  LABEL_HEADROOM_FOR,
  LABEL_HEADROOM_ROLE,
} from "../mppod/labels.ts";
import { headroomPodName } from "../mppod/naming.ts";

/** Headroom settings of the controller; headroom is on when all three names are set. */
export interface HeadroomConfig {
  /** Namespace of the headroom pods (the Mountpoint namespace). */
  readonly namespace: string;
  /** The pause image. */
  readonly image: string;
  /** Priority class of headroom pods. */
  readonly priorityClassName: string;
  /** Priority class of the Mountpoint Pods of workloads that reserved headroom. */
  readonly preemptingPriorityClassName: string;
}

/** True when the controller reserves headroom. */
export function headroomEnabled(c: HeadroomConfig | undefined): c is HeadroomConfig {
  return Boolean(c?.image && c.priorityClassName && c.preemptingPriorityClassName);
}

/** The role of a headroom pod. */
export type HeadroomRole = "placement" | "mountpoint";

/** CPU (cores) and memory (bytes). */
export interface Requests {
  readonly cpu: number;
  readonly memory: number;
}

/** No request. */
export const NO_REQUESTS: Requests = { cpu: 0, memory: 0 };

/** `a + b`. */
export function addRequests(a: Requests, b: Requests): Requests {
  return { cpu: a.cpu + b.cpu, memory: a.memory + b.memory };
}

function maxRequests(a: Requests, b: Requests): Requests {
  return { cpu: Math.max(a.cpu, b.cpu), memory: Math.max(a.memory, b.memory) };
}

/** The cpu and memory of a requests map (missing or invalid: 0). */
export function requestsOf(r: Readonly<Record<string, string>> | undefined): Requests {
  return {
    cpu: Math.max(0, parseQuantity(r?.cpu ?? "0") ?? 0),
    memory: Math.max(0, parseQuantity(r?.memory ?? "0") ?? 0),
  };
}

/** As a requests map: millicores and bytes, rounded up. */
export function requestQuantities(r: Requests): Record<string, string> {
  return {
    cpu: `${Math.ceil(Math.round(r.cpu * 1e6) / 1e3)}m`,
    memory: String(Math.ceil(r.memory)),
  };
}

/**
 * What the scheduler counts for a pod (cpu and memory): its containers and sidecars (init
 * containers with `restartPolicy: Always`), or its largest other init container if that is more,
 * plus the pod overhead.
 */
export function podRequests(pod: Pod): Requests {
  let running = NO_REQUESTS;
  let init = NO_REQUESTS;
  for (const c of pod.spec.initContainers ?? []) {
    const r = requestsOf(c.resources?.requests);
    if (c.restartPolicy === "Always") running = addRequests(running, r);
    else init = maxRequests(init, r);
  }
  for (const c of pod.spec.containers ?? []) {
    running = addRequests(running, requestsOf(c.resources?.requests));
  }
  const overhead = requestsOf(pod.spec.overhead as Record<string, string> | undefined);
  return addRequests(maxRequests(running, init), overhead);
}

/** True when the workload opted in to headroom (our scheduling gate is still on it). */
export function hasHeadroomGate(pod: Pod): boolean {
  return ((pod.spec.schedulingGates as { name?: string }[] | undefined) ?? []).some((g) =>
    g.name === GATE_RESERVE_HEADROOM
  );
}

interface NodeSelectorTerm {
  matchExpressions?: unknown[];
  matchFields?: { key: string; operator: string; values?: string[] }[];
}

interface AffinityLike {
  nodeAffinity?: {
    requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: NodeSelectorTerm[] };
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

function headroomPod(
  c: HeadroomConfig,
  workload: Pod,
  role: HeadroomRole,
  requests: Requests,
  spec: Record<string, unknown>,
): Pod {
  const uid = workload.metadata.uid!;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: headroomPodName(uid, role),
      namespace: c.namespace,
      labels: {
        "app.kubernetes.io/name": "s3-csi-headroom",
        [LABEL_COMPONENT]: COMPONENT_HEADROOM_POD,
        [LABEL_HEADROOM_FOR]: uid,
        [LABEL_HEADROOM_ROLE]: role,
      },
      annotations: {
        [LABEL_HEADROOM_FOR]: `${workload.metadata.namespace}/${workload.metadata.name}`,
      },
    },
    spec: {
      ...spec,
      priorityClassName: c.priorityClassName,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 0,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65535,
        runAsGroup: 65535,
        seccompProfile: { type: "RuntimeDefault" },
      },
      containers: [{
        name: "pause",
        image: c.image,
        imagePullPolicy: "IfNotPresent",
        resources: { requests: requestQuantities(requests) },
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ["ALL"] },
          seccompProfile: { type: "RuntimeDefault" },
        },
      }],
    },
  };
}

/**
 * The placement pod of `workload`: room for the workload and `mountpoints` (its Mountpoint Pods'
 * requests), wherever the workload could be scheduled (its node selector, node affinity and
 * tolerations; its pod (anti-)affinity and topology spread are not copied).
 */
export function placementPod(c: HeadroomConfig, workload: Pod, mountpoints: Requests): Pod {
  const nodeAffinity = (workload.spec.affinity as AffinityLike | undefined)?.nodeAffinity;
  return headroomPod(c, workload, "placement", addRequests(podRequests(workload), mountpoints), {
    ...(workload.spec.nodeSelector ? { nodeSelector: workload.spec.nodeSelector } : {}),
    ...(nodeAffinity ? { affinity: { nodeAffinity } } : {}),
    ...(workload.spec.tolerations ? { tolerations: workload.spec.tolerations } : {}),
  });
}

/**
 * The mountpoint pod of `workload`: room for its Mountpoint Pods on `node` (pinned, like them, by
 * node affinity on the name), owned by the Node when its UID is known.
 */
export function mountpointReservation(
  c: HeadroomConfig,
  workload: Pod,
  node: string,
  nodeUid: string | undefined,
  mountpoints: Requests,
  tolerations: readonly unknown[],
): Pod {
  const pod = headroomPod(c, workload, "mountpoint", mountpoints, {
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{
            matchFields: [{ key: "metadata.name", operator: "In", values: [node] }],
          }],
        },
      },
    },
    tolerations: [...tolerations],
  });
  if (nodeUid) {
    pod.metadata.ownerReferences = [
      { apiVersion: "v1", kind: "Node", name: node, uid: nodeUid, controller: true },
    ];
  }
  return pod;
}

/**
 * The merge patch that hands `workload` its reserved node: its required node affinity narrowed to
 * `node` (each term gets `metadata.name In [node]`; a gated pod may only narrow it) and our
 * scheduling gate removed. Carries the workload's resourceVersion: a concurrent change conflicts.
 */
export function pinToNodePatch(workload: Pod, node: string): Record<string, unknown> {
  const pin = { key: "metadata.name", operator: "In", values: [node] };
  const affinity = workload.spec.affinity as AffinityLike | undefined;
  const terms = affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
    ?.nodeSelectorTerms;
  const pinned: NodeSelectorTerm[] = terms?.length
    ? terms.map((t) => ({ ...t, matchFields: [...(t.matchFields ?? []), pin] }))
    : [{ matchFields: [pin] }];
  const gates = ((workload.spec.schedulingGates as { name: string }[] | undefined) ?? [])
    .filter((g) => g.name !== GATE_RESERVE_HEADROOM);
  return {
    metadata: { resourceVersion: workload.metadata.resourceVersion },
    spec: {
      schedulingGates: gates.length ? gates : null,
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: pinned },
        },
      },
    },
  };
}

/** The merge patch that removes our scheduling gate (nothing to reserve). */
export function ungatePatch(workload: Pod): Record<string, unknown> {
  const gates = ((workload.spec.schedulingGates as { name: string }[] | undefined) ?? [])
    .filter((g) => g.name !== GATE_RESERVE_HEADROOM);
  return {
    metadata: { resourceVersion: workload.metadata.resourceVersion },
    spec: { schedulingGates: gates.length ? gates : null },
  };
}
