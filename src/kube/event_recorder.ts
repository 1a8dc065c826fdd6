/**
 * Kubernetes Events (core/v1) on objects, as `kubectl describe` shows them. Repeats of the same
 * (object, type, reason, message) within {@link DEDUPE_WINDOW_MS} are folded into one Event whose
 * count and lastTimestamp are bumped (as client-go's event correlator does), so a retrying
 * component does not flood the API.
 *
 * Recording never throws: a failure to record is logged, not propagated.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "./client.ts";
import { NotFoundError } from "./errors.ts";
import { EVENTS } from "./resources.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { redactUrlCredentials } from "../util/redact.ts";
import { kubeTime } from "./time.ts";

/** Repeats inside this window update the existing Event instead of creating one. */
export const DEDUPE_WINDOW_MS = 10 * 60_000;

/** Event type. */
export type EventType = "Normal" | "Warning";

/** Records Events for one component. */
export interface EventRecorder {
  /** Record an event on `obj`; `signal` bounds the API call. */
  record(
    obj: KubeObject,
    type: EventType,
    reason: string,
    message: string,
    signal?: AbortSignal,
  ): Promise<void>;
}

interface Seen {
  name: string;
  namespace: string;
  count: number;
  at: number;
}

/** An {@link EventRecorder} writing to the API server. */
export class ApiEventRecorder implements EventRecorder {
  readonly #client: KubeClient;
  readonly #component: string;
  readonly #instance: string;
  readonly #host: string | undefined;
  readonly #now: () => number;
  readonly #seen = new Map<string, Seen>();
  /** Makes names unique within one millisecond. */
  #seq = 0;
  readonly #log = logger("kube", "events");

  /**
   * Create a recorder for `component` (e.g. `s3-csi-controller`) running as `instance`; `host`
   * (a node name) is written as the events' `source.host`, as kubelet does.
   */
  constructor(
    client: KubeClient,
    component: string,
    instance: string,
    host?: string,
    now: () => number = Date.now,
  ) {
    this.#client = client;
    this.#component = component;
    this.#instance = instance;
    this.#host = host;
    this.#now = now;
  }

  /** @inheritdoc */
  async record(
    obj: KubeObject,
    type: EventType,
    reason: string,
    message: string,
    signal?: AbortSignal,
  ): Promise<void> {
    message = redactUrlCredentials(message);
    const meta = obj.metadata ?? {};
    const namespace = meta.namespace ?? "default";
    const dedupeKey = `${meta.uid ?? `${namespace}/${meta.name}`}|${type}|${reason}|${message}`;
    const options = signal ? { signal } : {};
    const now = this.#now();
    const seen = this.#seen.get(dedupeKey);
    try {
      if (seen && now - seen.at < DEDUPE_WINDOW_MS) {
        seen.count++;
        seen.at = now;
        const patched = await this.#client.patch(EVENTS, seen.name, seen.namespace, {
          count: seen.count,
          lastTimestamp: kubeTime(now),
        }, options).then(() => true, (err) => {
          // The Event expired (the API server keeps them for an hour by default) or was deleted:
          // start a new one below.
          if (err instanceof NotFoundError) return false;
          throw err;
        });
        if (patched) return;
        this.#seen.delete(dedupeKey);
      }
      const name = `${meta.name}.${
        (BigInt(now) * 1_000_000n + BigInt(this.#seq++ % 1_000_000)).toString(16)
      }`;
      const time = kubeTime(now);
      await this.#client.create(EVENTS, {
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: obj.apiVersion ?? "v1",
          kind: obj.kind ?? "Pod",
          name: meta.name,
          namespace,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
        },
        reason,
        message,
        type,
        source: this.#host ? { component: this.#component, host: this.#host } : {
          component: this.#component,
        },
        reportingComponent: this.#component,
        reportingInstance: this.#instance,
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
      }, options);
      this.#seen.set(dedupeKey, { name, namespace, count: 1, at: now });
      if (this.#seen.size > 5000) this.#prune(now);
    } catch (err) {
      this.#log.warn("Could not record event {reason} on {object}: {error}", {
        reason,
        object: `${namespace}/${meta.name}`,
        error: errorMessage(err),
      });
      this.#seen.delete(dedupeKey);
    }
  }

  /** Forget the deduplication state of an object that is gone (by UID). */
  forget(uid: string): void {
    for (const k of this.#seen.keys()) if (k.startsWith(`${uid}|`)) this.#seen.delete(k);
  }

  #prune(now: number): void {
    for (const [k, v] of this.#seen) if (now - v.at > DEDUPE_WINDOW_MS) this.#seen.delete(k);
  }
}

/** An {@link EventRecorder} that keeps events in memory (unit tests). */
export class MemoryEventRecorder implements EventRecorder {
  /** Recorded events. */
  readonly events: { object: string; type: EventType; reason: string; message: string }[] = [];

  /** @inheritdoc */
  record(obj: KubeObject, type: EventType, reason: string, message: string): Promise<void> {
    this.events.push({
      object: `${obj.metadata?.namespace}/${obj.metadata?.name}`,
      type,
      reason,
      message,
    });
    return Promise.resolve();
  }
}
