/**
 * Headroom: a workload that opts in (scheduling gate `s3.csi.scality.com/reserve-headroom-for-mppod`)
 * never lands on a node where its Mountpoint Pods cannot be scheduled. Without the gate nothing
 * changes. The flow (pod specs in `headroom_pods.ts`):
 *
 * 1. **Reserve.** The workload is gated (the scheduler ignores it) and its S3 claims are bound: a
 *    placement pod requesting the workload's and its Mountpoint Pods' cpu and memory, with the
 *    workload's node selector, node affinity and tolerations, goes to the scheduler at the headroom
 *    priority. While no node has room for all of it, it stays Pending and so does the workload
 *    (Event `HeadroomPending` on the workload, with the scheduler's reason).
 * 2. **Hand over.** The placement pod is bound to a node: a mountpoint headroom pod (the Mountpoint
 *    Pods' requests) is created pinned to that node, and the workload is pinned there too (its
 *    required node affinity narrowed to the node) and ungated. The workload then preempts the
 *    placement pod (lower priority) and takes its room; the mountpoint headroom pod takes the rest.
 *    A workload that cannot preempt (priority not above the headroom class, or
 *    `preemptionPolicy: Never`) gets the room by the controller deleting the placement pod.
 * 3. **Mount.** The workload is bound: its Mountpoint Pods are created at the preempting priority
 *    class and preempt the mountpoint headroom pod.
 * 4. **Release.** Once its Mountpoint Pods run (or it shares running ones, or it ends), the
 *    workload's headroom pods are deleted; so are those of a workload that is gone.
 *
 * Between two steps the room is held by a headroom pod or by the preemption of a higher-priority
 * pod (nominated on the node), except for the moment between the placement pod's eviction and the
 * mountpoint headroom pod's binding; a pod of higher priority than the headroom class that is
 * scheduled in that moment takes it, and the Mountpoint Pods then preempt a lower-priority pod
 * instead (as with no headroom at all).
 *
 * @module
 */
import type { KubeClient } from "../kube/client.ts";
import { AlreadyExistsError, ConflictError, NotFoundError } from "../kube/errors.ts";
import type { EventRecorder } from "../kube/event_recorder.ts";
import { PODS } from "../kube/resources.ts";
import type { Pod } from "../kube/types.ts";
import { LABEL_HEADROOM_FOR, LABEL_HEADROOM_ROLE } from "../mppod/labels.ts";
import { headroomPodName } from "../mppod/naming.ts";
import {
  type MountpointPodConfig,
  MountpointPodSpecError,
  mountpointResources,
} from "../mppod/pod_spec.ts";
import { SCHEDULING_TOLERATIONS } from "../mppod/tolerations.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import {
  addRequests,
  type HeadroomConfig,
  headroomEnabled,
  type HeadroomRole,
  mountpointReservation,
  NO_REQUESTS,
  pinToNodePatch,
  placementPod,
  requestQuantities,
  type Requests,
  requestsOf,
  ungatePatch,
} from "./headroom_pods.ts";
import type { WorkloadVolume } from "./workload_volumes.ts";

/** What {@link Headroom} reads and writes through the reconciler. */
export interface HeadroomOptions {
  readonly client: KubeClient;
  /** Undefined or incomplete: headroom is off (a gated workload gets a Warning Event). */
  readonly config?: HeadroomConfig;
  readonly podConfig: MountpointPodConfig;
  readonly recorder: EventRecorder;
  /** A pod by key, as the reconciler sees it (its cache plus its own recent writes). */
  pod(key: string): Pod | undefined;
  /** Remember a pod this wrote or deleted (`undefined`: deleted). */
  wrote(key: string, pod: Pod | undefined): void;
  /** The headroom pods of a workload UID. */
  headroomPodsOf(uid: string): Pod[];
  /** The UID of a Node, when it exists. */
  nodeUid(name: string): Promise<string | undefined>;
}

/** The headroom flow of the reconciler. */
export class Headroom {
  readonly #o: HeadroomOptions;
  readonly #locks = new KeyedMutex();
  readonly #log = logger("controller", "headroom");

  /** Create over the reconciler's views. */
  constructor(options: HeadroomOptions) {
    this.#o = options;
  }

  /** Namespace of the headroom pods. */
  get #ns(): string {
    return this.#o.podConfig.namespace;
  }

  /** True when `uid` has headroom pods: its Mountpoint Pods get the preempting class. */
  reserved(uid: string): boolean {
    return this.#o.headroomPodsOf(uid).length > 0;
  }

  /** The priority class of Mountpoint Pods created for `workloads` (undefined: the default). */
  priorityClassFor(workloads: readonly Pod[]): string | undefined {
    const c = this.#o.config;
    if (!headroomEnabled(c)) return undefined;
    return workloads.some((w) => this.reserved(w.metadata.uid!))
      ? c.preemptingPriorityClassName
      : undefined;
  }

  /** The Mountpoint Pods' requests of `volumes`. @throws {MountpointPodSpecError} */
  #mountpointRequests(volumes: readonly WorkloadVolume[]): Requests {
    return volumes.reduce(
      (sum, v) =>
        addRequests(
          sum,
          requestsOf(
            mountpointResources(this.#o.podConfig, v.pv.spec.csi?.volumeAttributes ?? {}).requests,
          ),
        ),
      NO_REQUESTS,
    );
  }

  /**
   * Steps 1 and 2 for an unscheduled workload that still carries the gate, whose S3 volumes are
   * `volumes` (every claim bound).
   */
  async reserve(workload: Pod, volumes: readonly WorkloadVolume[]): Promise<void> {
    const c = this.#o.config;
    if (!headroomEnabled(c)) {
      await this.#o.recorder.record(
        workload,
        "Warning",
        "HeadroomDisabled",
        "The workload waits for the scheduling gate s3.csi.scality.com/reserve-headroom-for-mppod, but this driver reserves no headroom (the controller's headroom priority classes or image are not set): remove the gate, or deploy the driver with mountpointPod.headroomPriorityClassName, preemptingPriorityClassName and headroomImage",
      );
      return;
    }
    const uid = workload.metadata.uid!;
    await this.#locks.run(uid, async () => {
      if (!volumes.length) {
        await this.#patchWorkload(workload, ungatePatch(workload));
        await this.#o.recorder.record(
          workload,
          "Normal",
          "HeadroomNotNeeded",
          "No volume of this driver: scheduling gate s3.csi.scality.com/reserve-headroom-for-mppod removed",
        );
        return;
      }
      let mountpoints: Requests;
      try {
        mountpoints = this.#mountpointRequests(volumes);
      } catch (err) {
        if (!(err instanceof MountpointPodSpecError)) throw err;
        await this.#o.recorder.record(workload, "Warning", "InvalidVolume", err.message);
        return;
      }
      const placement = this.#headroomPod(uid, "placement");
      if (!placement) {
        const pod = placementPod(c, workload, mountpoints);
        await this.#create(pod);
        const q = requestQuantities(mountpoints);
        await this.#o.recorder.record(
          workload,
          "Normal",
          "HeadroomReserving",
          `Reserving room for the workload and its ${volumes.length} Mountpoint Pod(s) (cpu ${q.cpu}, memory ${q.memory}) with headroom pod ${this.#ns}/${pod.metadata.name}`,
        );
        return;
      }
      const node = placement.spec.nodeName;
      if (!node) {
        const why = placement.status?.conditions?.find((x) =>
          x.type === "PodScheduled" && x.status === "False"
        )?.message;
        if (why) {
          await this.#o.recorder.record(
            workload,
            "Warning",
            "HeadroomPending",
            `No node has room for the workload and its Mountpoint Pod(s) yet: headroom pod ${this.#ns}/${placement.metadata.name}: ${why}`,
          );
        }
        return;
      }
      if (!this.#headroomPod(uid, "mountpoint")) {
        await this.#create(mountpointReservation(
          c,
          workload,
          node,
          await this.#o.nodeUid(node),
          mountpoints,
          [...SCHEDULING_TOLERATIONS, ...(workload.spec.tolerations ?? [])],
        ));
      }
      if (!(await this.#patchWorkload(workload, pinToNodePatch(workload, node)))) return;
      await this.#o.recorder.record(
        workload,
        "Normal",
        "HeadroomReserved",
        `Room reserved on node ${node}: the workload is pinned there and ungated; its Mountpoint Pod(s) preempt headroom pod ${this.#ns}/${
          headroomPodName(uid, "mountpoint")
        }`,
      );
      if (!canPreempt(workload, placement)) await this.#delete(placement);
    });
  }

  /**
   * Step 4 for a workload that is bound, or gone (`workload` undefined, or `ended`): its placement
   * pod goes once it is bound, its mountpoint headroom pod once its Mountpoint Pods run (every
   * one of `mountpointPods` Running, one per S3 volume) or it ended.
   */
  async settle(
    uid: string,
    state: { ended: true } | { ended: false; volumes: number; mountpointPods: readonly Pod[] },
  ): Promise<void> {
    const pods = this.#o.headroomPodsOf(uid);
    if (!pods.length) return;
    await this.#locks.run(uid, async () => {
      const running = !state.ended && state.mountpointPods.length >= state.volumes &&
        state.mountpointPods.every((p) => p.status?.phase === "Running");
      for (const p of pods) {
        const role = p.metadata.labels?.[LABEL_HEADROOM_ROLE];
        if (state.ended || role === "placement" || running) await this.#delete(p);
      }
    });
  }

  #headroomPod(uid: string, role: HeadroomRole): Pod | undefined {
    return this.#o.pod(`${this.#ns}/${headroomPodName(uid, role)}`);
  }

  async #create(pod: Pod): Promise<void> {
    try {
      const created = await this.#o.client.create<Pod>(PODS, pod);
      this.#o.wrote(`${this.#ns}/${pod.metadata.name}`, created);
      this.#log.info("Created headroom pod {pod} for workload {workload}", {
        pod: pod.metadata.name,
        workload: pod.metadata.annotations?.[LABEL_HEADROOM_FOR],
      });
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
  }

  async #delete(pod: Pod): Promise<void> {
    const name = pod.metadata.name!;
    try {
      await this.#o.client.delete(PODS, name, this.#ns, {
        preconditions: { uid: pod.metadata.uid! },
        gracePeriodSeconds: 0,
      });
      this.#o.wrote(`${this.#ns}/${name}`, undefined);
      this.#log.info("Deleted headroom pod {pod}", { pod: name });
    } catch (err) {
      if (!(err instanceof NotFoundError || err instanceof ConflictError)) throw err;
    }
  }

  /** Patch the workload; false when it changed meanwhile (the next reconcile retries). */
  async #patchWorkload(workload: Pod, patch: Record<string, unknown>): Promise<boolean> {
    try {
      await this.#o.client.patch(
        PODS,
        workload.metadata.name!,
        workload.metadata.namespace,
        patch,
      );
      return true;
    } catch (err) {
      if (err instanceof ConflictError || err instanceof NotFoundError) {
        this.#log.debug("Workload {pod} changed meanwhile: {error}", {
          pod: `${workload.metadata.namespace}/${workload.metadata.name}`,
          error: errorMessage(err),
        });
        return false;
      }
      throw err;
    }
  }
}

/**
 * True when the scheduler lets `workload` preempt `placement`: a higher priority (both resolved by
 * the Priority admission into `spec.priority`; 0 when absent) and a preemption policy that allows it.
 */
export function canPreempt(workload: Pod, placement: Pod): boolean {
  const p = (pod: Pod) => typeof pod.spec.priority === "number" ? pod.spec.priority : 0;
  return workload.spec.preemptionPolicy !== "Never" && p(workload) > p(placement);
}
