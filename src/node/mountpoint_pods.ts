/**
 * What the node plugin knows about Mountpoint Pods and their assignments, kept current by two
 * watches (never polled): the S3PAs of this node (field selector `spec.nodeName=<node>`) and the
 * Mountpoint Pods of this node (namespace `mount-s3`, field selector `spec.nodeName=<node>`).
 *
 * NodePublishVolume waits here, bounded, for (1) an S3PA that assigns the workload to a
 * Mountpoint Pod and (2) that pod to be `Running`. Each wait is woken by watch events only.
 *
 * @module
 */
import {
  type MountpointS3PodAttachment,
  S3PA_FIELDS,
  type S3paSpec,
} from "../api/mountpoint_s3_pod_attachment.ts";
import { failedPrecondition } from "../csi/errors.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import { Informer, type InformerHandlers } from "../kube/informer.ts";
import { PODS } from "../kube/resources.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import { ANNOTATION_BROKEN, ANNOTATION_NEEDS_UNMOUNT, isAnnotatedTrue } from "../mppod/labels.ts";

/** The parts of a Pod the node plugin reads. */
export interface MountpointPod extends KubeObject {
  spec?: {
    nodeName?: string;
    securityContext?: { runAsUser?: number; runAsGroup?: number; fsGroup?: number };
    containers?: {
      name?: string;
      image?: string;
      command?: string[];
      securityContext?: { runAsUser?: number; runAsGroup?: number };
    }[];
    volumes?: { name?: string; [k: string]: unknown }[];
  };
  status?: {
    phase?: string;
    reason?: string;
    message?: string;
    conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
    containerStatuses?: {
      name?: string;
      restartCount?: number;
      state?: {
        waiting?: { reason?: string; message?: string };
        terminated?: { reason?: string; exitCode?: number; message?: string };
      };
    }[];
  };
}

/** Where to look. */
export interface MountpointPodsOptions {
  /** This node's name. */
  readonly nodeName: string;
  /** Namespace of Mountpoint Pods. */
  readonly namespace: string;
  /** Informer resync period (re-delivers pods to the unmounter). @default 60000 */
  readonly resyncMs?: number;
}

/** A workload to find: its pod UID and volume. */
export interface AssignmentQuery {
  /** Workload pod UID. */
  readonly podUID: string;
  /** PV name. */
  readonly volumeName: string;
  /** Volume handle. */
  readonly volumeId: string;
}

/** The uid and gid the Mountpoint Pod's container runs as (for credential file ownership). */
export function podUser(pod: MountpointPod): { uid: number; gid: number } {
  const c = pod.spec?.containers?.[0]?.securityContext;
  const p = pod.spec?.securityContext;
  const uid = c?.runAsUser ?? p?.runAsUser ?? 1000;
  return { uid, gid: c?.runAsGroup ?? p?.runAsGroup ?? p?.fsGroup ?? uid };
}

/** Why a pod is not running, in words, for error messages. */
export function describePodState(pod: MountpointPod): string {
  const s = pod.status ?? {};
  const parts = [`phase ${s.phase ?? "unknown"}`];
  const unschedulable = s.conditions?.find((c) =>
    c.type === "PodScheduled" && c.status === "False"
  );
  if (unschedulable) {
    parts.push(
      `unschedulable: ${unschedulable.reason ?? ""} ${unschedulable.message ?? ""}`.trim(),
    );
  }
  for (const cs of s.containerStatuses ?? []) {
    const w = cs.state?.waiting;
    const t = cs.state?.terminated;
    if (w?.reason) {
      parts.push(`container ${cs.name} waiting: ${w.reason} ${w.message ?? ""}`.trim());
    }
    if (t) {
      parts.push(`container ${cs.name} terminated: ${t.reason ?? ""} exit ${t.exitCode ?? "?"}`);
    }
  }
  if (s.reason) parts.push(`${s.reason}${s.message ? `: ${s.message}` : ""}`);
  if (pod.metadata?.deletionTimestamp) parts.push("being deleted");
  return parts.join("; ");
}

/** Watched S3PAs and Mountpoint Pods of one node. */
export class MountpointPods {
  readonly #options: MountpointPodsOptions;
  readonly #kube: KubeClient;
  readonly #s3pas: Informer<MountpointS3PodAttachment & KubeObject>;
  readonly #pods: Informer<MountpointPod>;
  readonly #wakers = new Set<() => void>();

  /** Create the watches; nothing runs until {@link run}. */
  constructor(kube: KubeClient, options: MountpointPodsOptions) {
    this.#options = options;
    this.#kube = kube;
    const field = `spec.nodeName=${options.nodeName}`;
    this.#s3pas = new Informer(kube, S3PAS, {
      fieldSelector: `${S3PA_FIELDS.nodeName}=${options.nodeName}`,
    });
    this.#s3pas.addIndex(
      "workload",
      (s) =>
        Object.values(s.spec?.mountpointS3PodAttachments ?? {}).flat().map((a) => a.workloadPodUID),
    );
    this.#pods = new Informer(kube, PODS, {
      namespace: options.namespace,
      fieldSelector: field,
      resyncMs: options.resyncMs ?? 60_000,
    });
    const wake = {
      add: () => this.#wake(),
      update: () => this.#wake(),
      delete: () => this.#wake(),
    };
    this.#s3pas.on(wake);
    this.#pods.on(wake);
  }

  /** Namespace of the Mountpoint Pods. */
  get namespace(): string {
    return this.#options.namespace;
  }

  /** Subscribe to Mountpoint Pod events (the unmounter). */
  onPod(handlers: InformerHandlers<MountpointPod>): void {
    this.#pods.on(handlers);
  }

  /** Run both watches until `signal` aborts. */
  run(signal: AbortSignal): Promise<void> {
    return Promise.all([this.#s3pas.run(signal), this.#pods.run(signal)]).then(() => {});
  }

  /** Both caches have been filled once (from then on they are kept current). */
  get synced(): boolean {
    return this.#s3pas.hasSynced && this.#pods.hasSynced;
  }

  /** Resolve once both caches are filled. */
  async waitForSync(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    await this.#s3pas.waitForSync(timeoutMs, signal);
    await this.#pods.waitForSync(timeoutMs, signal);
  }

  /**
   * Mark Mountpoint Pod `name` broken (annotation {@link ANNOTATION_BROKEN}) with `reason`: the
   * controller tells its workloads and replaces it. Only this pod's own UID is patched.
   */
  async markBroken(name: string, reason: string, signal?: AbortSignal): Promise<void> {
    const pod = this.pod(name);
    const uid = pod?.metadata?.uid;
    if (!uid || pod.metadata?.annotations?.[ANNOTATION_BROKEN]) return;
    const text = reason.replace(/\s+/g, " ").trim().slice(0, 1024);
    await this.#kube.patch(PODS, name, this.#options.namespace, {
      metadata: { uid, annotations: { [ANNOTATION_BROKEN]: text } },
    }, { type: "merge", ...(signal ? { signal } : {}) });
  }

  /** Mountpoint Pod `name` read from the API server now (not the cache); undefined if none. */
  fetch(name: string, signal?: AbortSignal): Promise<MountpointPod | undefined> {
    return this.#kube.get<MountpointPod>(
      PODS,
      name,
      this.#options.namespace,
      signal ? { signal } : {},
    );
  }

  /** A cached Mountpoint Pod by name. */
  pod(name: string): MountpointPod | undefined {
    return this.#pods.get(`${this.#options.namespace}/${name}`);
  }

  /** Every cached Mountpoint Pod. */
  pods(): MountpointPod[] {
    return this.#pods.list();
  }

  /** The Mountpoint Pod name assigned to a workload, if the cache has it. */
  findAssignment(q: AssignmentQuery): string | undefined {
    return this.findAttachment(q)?.mountpointPod;
  }

  /** The S3PA that assigns a workload, and the Mountpoint Pod it assigns, if the cache has it. */
  findAttachment(
    q: AssignmentQuery,
  ): { readonly mountpointPod: string; readonly spec: S3paSpec } | undefined {
    for (const s3pa of this.#s3pas.byIndex("workload", q.podUID)) {
      const spec = s3pa.spec;
      if (spec.persistentVolumeName !== q.volumeName || spec.volumeID !== q.volumeId) continue;
      for (const [mpPod, workloads] of Object.entries(spec.mountpointS3PodAttachments ?? {})) {
        if (workloads.some((w) => w.workloadPodUID === q.podUID)) {
          return { mountpointPod: mpPod, spec };
        }
      }
    }
    return undefined;
  }

  /**
   * Wait until an S3PA assigns the workload to a Mountpoint Pod.
   * @throws {CsiError} FailedPrecondition after `timeoutMs`, naming what is missing
   */
  waitForAssignment(q: AssignmentQuery, timeoutMs: number, signal?: AbortSignal): Promise<string> {
    return this.#waitFor(() => this.findAssignment(q), timeoutMs, signal, () =>
      failedPrecondition(
        `No Mountpoint Pod was assigned to pod ${q.podUID} for volume "${q.volumeName}" (handle "${q.volumeId}") on node ${this.#options.nodeName} within ${
          Math.round(timeoutMs / 1000)
        } s: check that the s3-csi-controller is running (kubectl logs -n kube-system -l app=s3-csi-controller) and that the PersistentVolume uses this driver`,
      ));
  }

  /**
   * Wait until the Mountpoint Pod is `Running`. Fails at once when it ended, is being deleted or
   * is marked for unmount; otherwise after `timeoutMs`, saying why it is not running.
   * @throws {CsiError} FailedPrecondition
   */
  waitForRunning(name: string, timeoutMs: number, signal?: AbortSignal): Promise<MountpointPod> {
    const ns = this.#options.namespace;
    return this.#waitFor<MountpointPod>(
      () => {
        const pod = this.pod(name);
        if (pod === undefined) return undefined;
        const phase = pod.status?.phase;
        if (
          phase === "Failed" || phase === "Succeeded" || pod.metadata?.deletionTimestamp ||
          isAnnotatedTrue(pod.metadata?.annotations, ANNOTATION_NEEDS_UNMOUNT)
        ) {
          return failedPrecondition(
            `Mountpoint Pod ${ns}/${name} cannot serve new mounts (${describePodState(pod)}${
              isAnnotatedTrue(pod.metadata?.annotations, ANNOTATION_NEEDS_UNMOUNT)
                ? "; marked for unmount"
                : ""
            }); the controller will assign a new one, retrying`,
          );
        }
        return phase === "Running" ? pod : undefined;
      },
      timeoutMs,
      signal,
      () => {
        const pod = this.pod(name);
        return failedPrecondition(
          pod === undefined
            ? `Mountpoint Pod ${ns}/${name} does not exist on node ${this.#options.nodeName} after ${
              Math.round(timeoutMs / 1000)
            } s: check the controller logs and kubectl get pods -n ${ns}`
            : `Mountpoint Pod ${ns}/${name} is not Running after ${
              Math.round(timeoutMs / 1000)
            } s (${describePodState(pod)}): see kubectl describe pod -n ${ns} ${name}`,
        );
      },
    );
  }

  #wake(): void {
    for (const w of [...this.#wakers]) w();
  }

  /** Resolve with the first non-undefined `check()`; an Error result rejects. */
  #waitFor<T>(
    check: () => T | Error | undefined,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    onTimeout: () => Error,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // deno-lint-ignore prefer-const
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        clearTimeout(timer);
        this.#wakers.delete(waker);
        signal?.removeEventListener("abort", onAbort);
      };
      const waker = () => {
        let v: T | Error | undefined;
        try {
          v = check();
        } catch (err) {
          v = err instanceof Error ? err : new Error(String(err));
        }
        if (v === undefined) return;
        done();
        if (v instanceof Error) reject(v);
        else resolve(v);
      };
      const onAbort = () => {
        done();
        reject(signal?.reason ?? new Error("aborted"));
      };
      this.#wakers.add(waker);
      signal?.addEventListener("abort", onAbort, { once: true });
      timer = setTimeout(() => {
        done();
        reject(onTimeout());
      }, timeoutMs);
      waker();
    });
  }
}
