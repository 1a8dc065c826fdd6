/**
 * Pod and container status as kubelet v1.32 computes it (`getPhase`, container states, the
 * conditions a controller reads). Pure functions over the emulator's container records.
 *
 * @module
 */
import type {
  ContainerState,
  ContainerStatus,
  PodCondition,
  PodSpec,
  PodStatus,
} from "./k8s_types.ts";

/** The emulator's record of one container. */
export interface ContainerRecord {
  readonly name: string;
  readonly image: string;
  state: ContainerState;
  lastState: ContainerState;
  restartCount: number;
  started: boolean;
  /** `emulator://<pid>` of the current or last process. */
  containerID?: string;
}

/** A new record: waiting with `reason` (ContainerCreating while volumes are being set up). */
export function newContainerRecord(
  name: string,
  image: string,
  reason = "ContainerCreating",
): ContainerRecord {
  return {
    name,
    image,
    state: { waiting: { reason } },
    lastState: {},
    restartCount: 0,
    started: false,
  };
}

/** `reason` of a terminated container: Completed for exit 0, else Error. */
export function terminatedReason(exitCode: number): string {
  return exitCode === 0 ? "Completed" : "Error";
}

/** kubelet's `getPhase` for regular containers. */
export function podPhase(
  restartPolicy: PodSpec["restartPolicy"],
  records: readonly ContainerRecord[],
): NonNullable<PodStatus["phase"]> {
  let waiting = 0;
  let running = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const r of records) {
    if (r.state.running) running++;
    else if (r.state.terminated) {
      stopped++;
      if (r.state.terminated.exitCode === 0) succeeded++;
    } else if (r.lastState.terminated) stopped++;
    else waiting++;
  }
  if (waiting > 0) return "Pending";
  if (running > 0) return "Running";
  if (stopped > 0) {
    if ((restartPolicy ?? "Always") === "Always") return "Running";
    if (stopped === succeeded) return "Succeeded";
    if (restartPolicy === "Never") return "Failed";
    return "Running";
  }
  return "Pending";
}

function condition(type: string, ok: boolean, now: string, reason?: string): PodCondition {
  return {
    type,
    status: ok ? "True" : "False",
    lastTransitionTime: now,
    ...(!ok && reason ? { reason } : {}),
  };
}

/** Inputs of {@link buildPodStatus}. */
export interface StatusInputs {
  readonly spec: PodSpec;
  readonly records: readonly ContainerRecord[];
  readonly startTime: string;
  readonly now: string;
  /** Force a phase (termination: Succeeded/Failed). */
  readonly phase?: PodStatus["phase"];
  readonly hostIP?: string;
  /** Init containers, run one after the other before the containers. */
  readonly initRecords?: readonly ContainerRecord[];
  /** False while init containers have not all succeeded. @default true */
  readonly initialized?: boolean;
  /** The pod's reason and message (an eviction: `Evicted`, what it used too much of). */
  readonly reason?: string;
  readonly message?: string;
}

function containerStatus(r: ContainerRecord): ContainerStatus {
  return {
    name: r.name,
    state: r.state,
    lastState: r.lastState,
    ready: !!r.state.running,
    started: !!r.state.running,
    restartCount: r.restartCount,
    image: r.image,
    imageID: "",
    ...(r.containerID ? { containerID: r.containerID } : {}),
  };
}

/** Phase while init containers run: Failed once one failed under `Never`, else Pending. */
export function initPhase(
  restartPolicy: PodSpec["restartPolicy"],
  initRecords: readonly ContainerRecord[],
): "Pending" | "Failed" {
  const failed = initRecords.some((r) => (r.state.terminated?.exitCode ?? 0) !== 0);
  return failed && restartPolicy === "Never" ? "Failed" : "Pending";
}

type Resources = { requests?: Record<string, string>; limits?: Record<string, string> };

/**
 * The pod's QoS class as kube-apiserver computes it at creation (`status.qosClass` is immutable
 * there): BestEffort without any request or limit, Guaranteed when every container has CPU and
 * memory limits equal to its requests, Burstable otherwise.
 */
export function qosClass(spec: PodSpec): "BestEffort" | "Burstable" | "Guaranteed" {
  const all = [...(spec.containers ?? []), ...(spec.initContainers ?? [])].map((c) =>
    ((c as { resources?: Resources }).resources ?? {}) as Resources
  );
  const any = all.some((r) =>
    Object.keys(r.requests ?? {}).length || Object.keys(r.limits ?? {}).length
  );
  if (!any) return "BestEffort";
  const guaranteed = all.every((r) =>
    ["cpu", "memory"].every((k) =>
      r.limits?.[k] !== undefined && (r.requests?.[k] ?? r.limits[k]) === r.limits[k]
    )
  );
  return guaranteed ? "Guaranteed" : "Burstable";
}

/** The full status the emulator PATCHes to `pods/<name>/status`. */
export function buildPodStatus(i: StatusInputs): PodStatus {
  const initialized = i.initialized ?? true;
  const phase = i.phase ??
    (initialized
      ? podPhase(i.spec.restartPolicy, i.records)
      : initPhase(i.spec.restartPolicy, i.initRecords ?? []));
  const allRunning = i.records.length > 0 && i.records.every((r) => r.state.running);
  const terminal = phase === "Succeeded" || phase === "Failed";
  const sandboxReady = !terminal && i.records.some((r) => r.started || r.state.running);
  const statuses: ContainerStatus[] = i.records.map(containerStatus);
  return {
    phase,
    conditions: [
      condition("PodReadyToStartContainers", sandboxReady, i.now),
      condition("Initialized", initialized, i.now, "ContainersNotInitialized"),
      condition(
        "Ready",
        allRunning && !terminal,
        i.now,
        terminal ? "PodCompleted" : "ContainersNotReady",
      ),
      condition(
        "ContainersReady",
        allRunning && !terminal,
        i.now,
        terminal ? "PodCompleted" : "ContainersNotReady",
      ),
      condition("PodScheduled", true, i.now),
    ],
    hostIP: i.hostIP ?? "127.0.0.1",
    podIP: "127.0.0.1",
    startTime: i.startTime,
    containerStatuses: statuses,
    ...(i.initRecords?.length ? { initContainerStatuses: i.initRecords.map(containerStatus) } : {}),
    qosClass: qosClass(i.spec),
    ...(i.reason ? { reason: i.reason } : {}),
    ...(i.message ? { message: i.message } : {}),
  };
}

/**
 * `TerminatePod`: containers not yet terminated become `ContainerStatusUnknown`/137 (their
 * `started` flag is cleared); a pod still Pending or Running ends Failed.
 */
export function finalizeRecords(records: ContainerRecord[], now: string): void {
  for (const r of records) {
    if (r.state.terminated) continue;
    r.lastState = r.state.running ? r.state : r.lastState;
    r.state = {
      terminated: {
        exitCode: 137,
        reason: "ContainerStatusUnknown",
        message: "The container could not be located when the pod was terminated",
        finishedAt: now,
      },
    };
  }
}
