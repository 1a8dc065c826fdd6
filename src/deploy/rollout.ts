/**
 * Bounded wait for the Deployment and DaemonSet to roll out, with a progress line whenever a
 * workload's status changes (and a heartbeat every 10 s). A cluster without nodes or controllers
 * (the API emulator) never reports progress: the wait ends at its timeout and says why.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../kube/client.ts";
import { errorMessage } from "../util/errors.ts";
import type { Manifest } from "./k8s_objects.ts";
import { describe, resourceOf } from "./kinds.ts";
import { pause } from "../util/sleep.ts";

/** Status of one workload. */
export interface RolloutStatus {
  /** The object, as `Kind namespace/name`. */
  readonly object: string;
  /** True when rolled out. */
  readonly done: boolean;
  /** Human readable, e.g. `1/1 updated, 1/1 available`. */
  readonly text: string;
}

interface WorkloadStatus extends KubeObject {
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
    desiredNumberScheduled?: number;
    updatedNumberScheduled?: number;
    numberAvailable?: number;
  };
  metadata?: KubeObject["metadata"] & { generation?: number };
}

/** Rollout state of a Deployment or DaemonSet as read from the API. */
export function rolloutState(obj: WorkloadStatus | undefined, what: string): RolloutStatus {
  if (!obj) return { object: what, done: false, text: "not found" };
  const s = obj.status ?? {};
  const gen = obj.metadata?.generation ?? 0;
  if ((s.observedGeneration ?? 0) < gen) {
    return { object: what, done: false, text: "waiting for its controller to observe it" };
  }
  if (obj.kind === "DaemonSet") {
    const want = s.desiredNumberScheduled ?? 0;
    const updated = s.updatedNumberScheduled ?? 0;
    const avail = s.numberAvailable ?? 0;
    return {
      object: what,
      done: updated >= want && avail >= want,
      text: `${updated}/${want} nodes updated, ${avail}/${want} available`,
    };
  }
  const want = obj.spec?.replicas ?? 1;
  const updated = s.updatedReplicas ?? 0;
  const avail = s.availableReplicas ?? 0;
  return {
    object: what,
    done: updated >= want && avail >= want && (s.replicas ?? 0) <= want,
    text: `${updated}/${want} updated, ${avail}/${want} available`,
  };
}

/** Options of {@link waitForRollout}. */
export interface RolloutOptions {
  /** Kubernetes API client. */
  readonly client: KubeClient;
  /** The Deployment and DaemonSet to watch. */
  readonly workloads: readonly Manifest[];
  /** Bound of the wait, in milliseconds. */
  readonly timeoutMs: number;
  /** Receives one line per progress step. */
  readonly progress: (line: string) => void;
  /** Poll interval (default 1 s). */
  readonly intervalMs?: number;
  /** Aborts the work early. */
  readonly signal?: AbortSignal;
}

/** Poll until every workload is rolled out or `timeoutMs` passes; returns the last statuses. */
export async function waitForRollout(o: RolloutOptions): Promise<RolloutStatus[]> {
  const started = Date.now();
  const last = new Map<string, string>();
  let heartbeat = started;
  let states: RolloutStatus[] = [];
  for (;;) {
    states = [];
    for (const w of o.workloads) {
      const what = describe(w);
      try {
        const got = await o.client.get<WorkloadStatus>(
          resourceOf(w),
          w.metadata.name,
          w.metadata.namespace,
          o.signal ? { signal: o.signal } : {},
        );
        states.push(rolloutState(got, what));
      } catch (err) {
        states.push({ object: what, done: false, text: `cannot be read: ${errorMessage(err)}` });
      }
    }
    const now = Date.now();
    const elapsed = Math.round((now - started) / 1000);
    for (const s of states) {
      if (last.get(s.object) !== s.text) {
        o.progress(`[${elapsed}s] ${s.object}: ${s.text}${s.done ? " (rolled out)" : ""}`);
        last.set(s.object, s.text);
        heartbeat = now;
      }
    }
    if (states.every((s) => s.done)) return states;
    if (now - started >= o.timeoutMs || o.signal?.aborted) {
      o.progress(
        `[${elapsed}s] rollout not complete after ${Math.round(o.timeoutMs / 1000)}s ` +
          "(a cluster without nodes or controllers never completes one; see --no-wait)",
      );
      return states;
    }
    if (now - heartbeat >= 10_000) {
      o.progress(
        `[${elapsed}s] still waiting: ${
          states.filter((s) => !s.done).map((s) => s.object).join(", ")
        }`,
      );
      heartbeat = now;
    }
    await pause(
      Math.min(o.intervalMs ?? 1000, Math.max(0, o.timeoutMs - (now - started))),
      o.signal,
    )
      .catch(() => {});
  }
}
