/**
 * WATCH responses ("Efficient detection of changes" in
 * https://kubernetes.io/docs/reference/using-api/api-concepts/): one JSON object per line, flushed
 * per event.
 *
 * 1. Start point: no/`0` resourceVersion → synthetic ADDED for current objects; `N` → replay of
 *    history after N, or a single `ERROR` 410 event and close when N is too old.
 * 2. Live events are filtered by namespace and selectors with enter/leave semantics (an object
 *    that stops matching is sent as DELETED with its previous state and the new RV).
 * 3. Bookmarks only with `allowWatchBookmarks=true`: one right after the initial events and then
 *    every `bookmarkIntervalMs`.
 * 4. The stream ends on `timeoutSeconds`, client disconnect, server stop or
 *    {@link WatchHub.closeAll} (forced restart); clients resume from their last RV.
 *
 * @module
 */
import type { Cluster } from "./cluster.ts";
import { type JsonObject, meta } from "./json_value.ts";
import { type Selection, selects } from "./list_request.ts";
import { groupVersion, type ResourceType, storageKey } from "./resources.ts";
import { statusBody } from "./status_errors.ts";
import { type IncludeObject, toTable } from "./table.ts";
import { HistoryExpiredError, type StoreEvent } from "./watch_hub.ts";

/** Options of one watch request. */
export interface WatchRequest {
  /** Watched type. */
  readonly type: ResourceType;
  /** Namespace and selectors. */
  readonly selection: Selection;
  /** `resourceVersion` query parameter ("" when absent). */
  readonly resourceVersion: string;
  /** `allowWatchBookmarks=true`. */
  readonly bookmarks: boolean;
  /** `sendInitialEvents=true` (WatchList): initial ADDED events, then an end bookmark. */
  readonly sendInitialEvents?: boolean;
  /** `timeoutSeconds`, if given. */
  readonly timeoutSeconds?: number | undefined;
  /** Render objects as one-row Tables. */
  readonly table: boolean;
  /** What Table rows carry (`includeObject`). @default "Metadata" */
  readonly includeObject?: IncludeObject;
  /** Bookmark period. */
  readonly bookmarkIntervalMs: number;
  /** Ends the stream (server shutdown or client abort). */
  readonly signal: AbortSignal;
}

interface WireEvent {
  readonly type: string;
  readonly object: JsonObject;
}

const encoder = new TextEncoder();

function translate(cluster: Cluster, req: WatchRequest, ev: StoreEvent): WireEvent | undefined {
  const t = req.type;
  const obj = cluster.present(t, ev.object);
  const now = selects(req.selection, obj);
  if (ev.type === "ADDED") return now ? { type: "ADDED", object: obj } : undefined;
  const prev = ev.prev ? cluster.present(t, ev.prev) : undefined;
  const before = prev ? selects(req.selection, prev) : false;
  if (ev.type === "DELETED") return now || before ? { type: "DELETED", object: obj } : undefined;
  if (now && before) return { type: "MODIFIED", object: obj };
  if (now) return { type: "ADDED", object: obj };
  if (before && prev) {
    meta(prev).resourceVersion = String(ev.rv);
    return { type: "DELETED", object: prev };
  }
  return undefined;
}

/** Build the streaming body of a watch. */
export function watchStream(cluster: Cluster, req: WatchRequest): ReadableStream<Uint8Array> {
  const t = req.type;
  const sk = storageKey(t);
  let firstTable = true;
  const render = (ev: WireEvent): Uint8Array => {
    let object = ev.object;
    if (req.table && ev.type !== "ERROR" && ev.type !== "BOOKMARK") {
      object = toTable(t, [object], { resourceVersion: String(meta(object).resourceVersion) }, {
        now: Date.now(),
        withColumns: firstTable,
        includeObject: req.includeObject ?? "Metadata",
      });
      firstTable = false;
    }
    return encoder.encode(`${JSON.stringify({ type: ev.type, object })}\n`);
  };
  const bookmark = (initialEnd: boolean): WireEvent => ({
    type: "BOOKMARK",
    object: {
      kind: t.kind,
      apiVersion: groupVersion(t),
      metadata: {
        resourceVersion: String(cluster.store.resourceVersion),
        creationTimestamp: null,
        ...(initialEnd ? { annotations: { "k8s.io/initial-events-end": "true" } } : {}),
      },
    },
  });
  const cleanups: (() => void)[] = [];
  const cleanup = () => {
    for (const c of cleanups.splice(0)) c();
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let closed = false;
      const close = () => {
        if (closed) return;
        closed = true;
        cleanup();
        try {
          controller.close();
        } catch {
          // Already closed or cancelled.
        }
      };
      const send = (ev: WireEvent) => {
        if (!closed) controller.enqueue(render(ev));
      };
      const rvText = req.resourceVersion;
      const fromRv = rvText === "" || rvText === "0" || req.sendInitialEvents
        ? undefined
        : Number(rvText);
      let initial: WireEvent[];
      if (fromRv === undefined) {
        initial = cluster.store.list(sk, t.namespaced ? req.selection.namespace : undefined)
          .map((o) => cluster.present(t, o))
          .filter((o) => selects(req.selection, o))
          .map((object) => ({ type: "ADDED", object }));
      } else {
        try {
          initial = cluster.store.hub.replay(sk, fromRv).map((ev) => translate(cluster, req, ev))
            .filter((e): e is WireEvent => e !== undefined);
        } catch (err) {
          if (!(err instanceof HistoryExpiredError)) throw err;
          send({ type: "ERROR", object: statusBody(410, "Expired", err.message) });
          close();
          return;
        }
      }
      const sub = cluster.store.hub.subscribe(sk, (ev) => {
        if (fromRv !== undefined && ev.rv <= fromRv) return;
        const wire = translate(cluster, req, ev);
        if (wire) send(wire);
      }, close);
      cleanups.push(() => sub.close());
      for (const ev of initial) send(ev);
      if (req.bookmarks && fromRv === undefined) send(bookmark(true));
      if (req.bookmarks) {
        const id = setInterval(() => send(bookmark(false)), req.bookmarkIntervalMs);
        cleanups.push(() => clearInterval(id));
      }
      if (req.timeoutSeconds !== undefined && req.timeoutSeconds > 0) {
        const id = setTimeout(close, req.timeoutSeconds * 1000);
        cleanups.push(() => clearTimeout(id));
      }
      if (req.signal.aborted) close();
      const onAbort = () => close();
      req.signal.addEventListener("abort", onAbort, { once: true });
      cleanups.push(() => req.signal.removeEventListener("abort", onAbort));
    },
    cancel() {
      cleanup();
    },
  });
}
