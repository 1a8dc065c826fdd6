/**
 * Change history and fan-out for watches. Every write in the {@link ObjectStore} publishes one
 * {@link StoreEvent}; the hub keeps a bounded history so watches can resume from an older
 * resourceVersion, and answers "expired" (410) once that history was dropped.
 *
 * @module
 */
import type { JsonObject } from "./json_value.ts";

/** A committed change. */
export interface StoreEvent {
  /** Watch event type. */
  readonly type: "ADDED" | "MODIFIED" | "DELETED";
  /** Storage key of the type (`group/plural`). */
  readonly storageKey: string;
  /** New state (for DELETED: last state with the deletion resourceVersion). */
  readonly object: JsonObject;
  /** Previous state (MODIFIED and DELETED). */
  readonly prev?: JsonObject;
  /** Global resourceVersion of the change. */
  readonly rv: number;
}

/** A live subscription created by {@link WatchHub.subscribe}. */
export interface Subscription {
  /** Stop receiving events; idempotent. */
  close(): void;
}

interface Subscriber {
  readonly storageKey: string;
  readonly onEvent: (ev: StoreEvent) => void;
  readonly onClose: () => void;
}

/** Thrown by {@link WatchHub.replay} when the requested resourceVersion is no longer in history. */
export class HistoryExpiredError extends Error {
  /** Error name. */
  override name = "HistoryExpiredError";
  /** Create the error for requested `rv`, when the oldest replayable one is `oldest`. */
  constructor(readonly rv: number, readonly oldest: number) {
    super(`too old resource version: ${rv} (${oldest})`);
  }
}

/** Bounded change log plus subscribers. */
export class WatchHub {
  #history: StoreEvent[] = [];
  #capacity: number;
  /** Highest resourceVersion whose event was dropped from history. */
  #compactedRv = 0;
  #subs = new Set<Subscriber>();

  /** Keep at most `capacity` events. @default 10000 */
  constructor(capacity = 10_000) {
    this.#capacity = capacity;
  }

  /** Record `ev` and deliver it to matching subscribers. */
  publish(ev: StoreEvent): void {
    this.#history.push(ev);
    if (this.#history.length > this.#capacity) {
      const dropped = this.#history.splice(0, this.#history.length - this.#capacity);
      this.#compactedRv = dropped[dropped.length - 1]!.rv;
    }
    for (const s of this.#subs) if (s.storageKey === ev.storageKey) s.onEvent(ev);
  }

  /** Events of `storageKey` after `rv`, oldest first. Throws {@link HistoryExpiredError}. */
  replay(storageKey: string, rv: number): StoreEvent[] {
    if (rv < this.#compactedRv) throw new HistoryExpiredError(rv, this.#compactedRv + 1);
    return this.#history.filter((e) => e.rv > rv && e.storageKey === storageKey);
  }

  /** Subscribe to future events of one storage key. `onClose` runs on {@link closeAll}. */
  subscribe(
    storageKey: string,
    onEvent: (ev: StoreEvent) => void,
    onClose: () => void,
  ): Subscription {
    const sub: Subscriber = { storageKey, onEvent, onClose };
    this.#subs.add(sub);
    return { close: () => void this.#subs.delete(sub) };
  }

  /** Number of open subscriptions. */
  get size(): number {
    return this.#subs.size;
  }

  /** Forget all history up to `rv` so older resumes get 410. */
  compact(rv: number): void {
    this.#history = this.#history.filter((e) => e.rv > rv);
    this.#compactedRv = Math.max(this.#compactedRv, rv);
  }

  /** End every open watch (clients reconnect from their last resourceVersion). */
  closeAll(): void {
    const subs = [...this.#subs];
    this.#subs.clear();
    for (const s of subs) s.onClose();
  }
}
