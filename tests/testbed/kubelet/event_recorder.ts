/**
 * core/v1 Events on Pods (and PVCs), deduplicated like client-go's event correlator: a repeat of the same
 * (object, type, reason, message) bumps `count` and `lastTimestamp` on the existing Event.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../../../src/kube/client.ts";
import { EVENTS } from "../../../src/kube/resources.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { kubeTime } from "../../../src/kube/time.ts";

/** The source component written into events. */
export interface EventSource {
  readonly component: string;
  readonly host: string;
}

/** Records events; failures are logged, never thrown (events are best effort). */
export class EventRecorder {
  readonly #client: KubeClient;
  readonly #source: EventSource;
  readonly #seen = new Map<string, { name: string; count: number }>();
  readonly #log = logger("kubelet", "events");

  /** Create a recorder writing through `client`. */
  constructor(client: KubeClient, source: EventSource) {
    this.#client = client;
    this.#source = source;
  }

  /** Record an event about `obj` (a Pod unless `obj.kind` says otherwise). */
  async record(
    obj: KubeObject,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
    signal?: AbortSignal,
  ): Promise<void> {
    const pod = {
      kind: obj.kind ?? "Pod",
      name: obj.metadata?.name ?? "",
      uid: obj.metadata?.uid ?? "",
    };
    const ns = obj.metadata?.namespace ?? "default";
    const key = `${pod.uid}\u0000${type}\u0000${reason}\u0000${message}`;
    const now = kubeTime();
    const seen = this.#seen.get(key);
    try {
      if (seen) {
        seen.count++;
        await this.#client.patch(EVENTS, seen.name, ns, {
          count: seen.count,
          lastTimestamp: now,
        }, { ...(signal ? { signal } : {}) });
        return;
      }
      const name = `${pod.name}.${
        (Date.now() * 1000 + Math.floor(Math.random() * 1000)).toString(16)
      }`;
      await this.#client.create(EVENTS, {
        metadata: { name, namespace: ns },
        involvedObject: {
          kind: pod.kind,
          apiVersion: "v1",
          namespace: ns,
          name: pod.name,
          uid: pod.uid,
        },
        type,
        reason,
        message,
        source: this.#source,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        reportingComponent: this.#source.component,
        reportingInstance: this.#source.host,
      }, { ...(signal ? { signal } : {}) });
      this.#seen.set(key, { name, count: 1 });
    } catch (err) {
      this.#log.warn("Could not record event {reason} on {object}: {error}", {
        reason,
        object: `${pod.kind} ${ns}/${pod.name}`,
        error: errorMessage(err),
      });
    }
  }

  /** Forget the dedup state of a pod that is gone. */
  forget(podUID: string): void {
    for (const k of this.#seen.keys()) if (k.startsWith(`${podUID}\u0000`)) this.#seen.delete(k);
  }
}
