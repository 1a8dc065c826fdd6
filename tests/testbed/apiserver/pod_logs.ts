/**
 * `GET /api/v1/namespaces/<ns>/pods/<name>/log` (`kubectl logs`). A real API server proxies this to
 * the kubelet of the pod's node; the emulator asks the kubelet registered for that node (the
 * kubelet emulator, see {@link PodLogs.register}) for the container's log and answers with its
 * text, as the kubelet would: `container`, `previous`, `tailLines`, `limitBytes` and `follow`
 * are honoured; the errors are the real ones (400 for a container that is not valid or has not
 * started, 404 for a missing pod, 500 when no kubelet serves the node). `timestamps`,
 * `sinceSeconds` and `sinceTime` are refused with 400: the emulator's logs carry no times.
 *
 * @module
 */
import { isObject, type JsonObject, meta } from "./json_value.ts";
import { ApiError, badRequest, internalError } from "./status_errors.ts";

/** What a node's kubelet serves for container logs. */
export interface NodeLogReader {
  /**
   * The log of `container` of the pod `podUID` from byte `offset` on: its current (or last) run,
   * or with `previous` the run before; undefined when the kubelet has no such log.
   */
  readContainerLog(
    podUID: string,
    container: string,
    previous: boolean,
    offset: number,
  ): Promise<Uint8Array | undefined>;
}

/** Kubelets by node name, for the log subresource. */
export class PodLogs {
  readonly #nodes = new Map<string, NodeLogReader>();

  /** Serve the logs of pods bound to `node` from `reader`; returns the unregistration. */
  register(node: string, reader: NodeLogReader): () => void {
    this.#nodes.set(node, reader);
    return () => {
      if (this.#nodes.get(node) === reader) this.#nodes.delete(node);
    };
  }

  /** The reader of `node`, if a kubelet registered. */
  reader(node: string): NodeLogReader | undefined {
    return this.#nodes.get(node);
  }
}

interface ContainerStatusLike {
  name?: string;
  restartCount?: number;
  state?: { waiting?: { reason?: string }; running?: unknown; terminated?: unknown };
  lastState?: { terminated?: unknown };
}

function containerStatus(pod: JsonObject, name: string): ContainerStatusLike | undefined {
  const status = isObject(pod.status) ? pod.status : {};
  const all = [
    ...(Array.isArray(status.initContainerStatuses) ? status.initContainerStatuses : []),
    ...(Array.isArray(status.containerStatuses) ? status.containerStatuses : []),
  ] as ContainerStatusLike[];
  return all.find((s) => s?.name === name);
}

function containerNames(pod: JsonObject): { init: string[]; main: string[] } {
  const spec = isObject(pod.spec) ? pod.spec : {};
  const names = (v: unknown) =>
    (Array.isArray(v) ? v : []).map((c) => (isObject(c) ? String(c.name) : "")).filter(Boolean);
  return { init: names(spec.initContainers), main: names(spec.containers) };
}

function nonNegativeInt(q: URLSearchParams, key: string): number | undefined {
  const v = q.get(key);
  if (v === null) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    throw badRequest(
      `invalid value for ${key}: ${JSON.stringify(v)}: must be a non-negative integer`,
    );
  }
  return n;
}

/** The last `n` lines of `text` (a trailing newline does not count as a line). */
export function tailLines(text: string, n: number): string {
  if (n === 0) return "";
  const lines = text.split("\n");
  const trailing = lines.at(-1) === "";
  if (trailing) lines.pop();
  return lines.slice(-n).join("\n") + (trailing ? "\n" : "");
}

/** Settings of {@link podLogResponse}. */
export interface PodLogRequest {
  readonly pod: JsonObject;
  readonly query: URLSearchParams;
  readonly logs: PodLogs;
  /** Reads the pod again (for `follow`: has the container ended?). */
  readonly reread: () => JsonObject | undefined;
  /** Ends a `follow` stream (server stop). */
  readonly signal: AbortSignal;
  /** Poll period of `follow`. @default 200 */
  readonly followPollMs?: number;
}

/** Answer a log request for `pod` (found). @throws {ApiError} as the kubelet/API server would */
export async function podLogResponse(r: PodLogRequest): Promise<Response> {
  const { pod, query: q } = r;
  const m = meta(pod);
  const podName = String(m.name);
  for (const key of ["timestamps", "sinceSeconds", "sinceTime"]) {
    const v = q.get(key);
    if (v !== null && v !== "false") {
      throw badRequest(
        `${key} is not supported by the kubelet emulator: its container logs carry no timestamps`,
      );
    }
  }
  const tail = nonNegativeInt(q, "tailLines");
  const limitBytes = nonNegativeInt(q, "limitBytes");
  const previous = q.get("previous") === "true";
  const follow = q.get("follow") === "true";
  const { init, main } = containerNames(pod);
  let container = q.get("container") ?? "";
  if (!container) {
    if (main.length !== 1) {
      throw badRequest(
        `a container name must be specified for pod ${podName}, choose one of: [${main.join(" ")}]${
          init.length ? ` or one of the init containers: [${init.join(" ")}]` : ""
        }`,
      );
    }
    container = main[0]!;
  }
  if (!init.includes(container) && !main.includes(container)) {
    throw badRequest(`container ${container} is not valid for pod ${podName}`);
  }
  const spec = isObject(pod.spec) ? pod.spec : {};
  const node = typeof spec.nodeName === "string" ? spec.nodeName : "";
  if (!node) throw badRequest(`pod ${podName} does not have a host assigned`);
  const status = containerStatus(pod, container);
  if (previous) {
    if (!status?.lastState?.terminated && !(status?.restartCount ?? 0)) {
      throw badRequest(
        `previous terminated container "${container}" in pod "${podName}" not found`,
      );
    }
  } else if (!status || (!status.state?.running && !status.state?.terminated)) {
    const reason = status?.state?.waiting?.reason ?? "ContainerCreating";
    throw badRequest(
      `container "${container}" in pod "${podName}" is waiting to start: ${reason}`,
    );
  }
  const reader = r.logs.reader(node);
  if (!reader) {
    throw internalError(
      `no kubelet serves the container logs of node "${node}" (the kubelet emulator registers itself when it runs in the same process as the API emulator)`,
    );
  }
  const uid = String(m.uid);
  const bytes = await reader.readContainerLog(uid, container, previous, 0);
  if (bytes === undefined) {
    throw new ApiError(
      400,
      "BadRequest",
      `${
        previous ? "previous terminated " : ""
      }container "${container}" in pod "${podName}" has no log on node "${node}"`,
      {},
    );
  }
  const headers = { "content-type": "text/plain", "cache-control": "no-cache, private" };
  const cap = (s: string) => limitBytes === undefined ? s : truncateUtf8(s, limitBytes);
  const text = new TextDecoder().decode(bytes);
  const first = tail === undefined ? text : tailLines(text, tail);
  if (!follow || previous) return new Response(cap(first), { headers });
  const more = (offset: number) => reader.readContainerLog(uid, container, false, offset);
  return new Response(followStream(r, more, container, bytes.length, cap(first), limitBytes), {
    headers,
  });
}

function truncateUtf8(s: string, bytes: number): string {
  const enc = new TextEncoder().encode(s);
  if (enc.length <= bytes) return s;
  return new TextDecoder().decode(enc.slice(0, bytes)).replace(/\uFFFD$/, "");
}

/** The text so far, then what the container appends, until it ends or the client goes away. */
function followStream(
  r: PodLogRequest,
  read: (offset: number) => Promise<Uint8Array | undefined>,
  container: string,
  start: number,
  first: string,
  limitBytes: number | undefined,
): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  let offset = start;
  let sent = 0;
  let closed = false;
  const pollMs = r.followPollMs ?? 200;
  return new ReadableStream<Uint8Array>({
    start(ctl) {
      const head = enc.encode(first);
      sent = head.length;
      if (head.length) ctl.enqueue(head);
    },
    async pull(ctl) {
      for (;;) {
        if (closed || r.signal.aborted) return ctl.close();
        if (limitBytes !== undefined && sent >= limitBytes) return ctl.close();
        const more = (await read(offset)) ?? new Uint8Array();
        if (more.length) {
          offset += more.length;
          const chunk = limitBytes === undefined ? more : more.slice(0, limitBytes - sent);
          sent += chunk.length;
          ctl.enqueue(chunk);
          return;
        }
        const pod = r.reread();
        const state = pod ? containerStatus(pod, container)?.state : undefined;
        // Ended (or the pod is gone): nothing more will be written.
        if (!pod || state?.terminated || !state?.running) return ctl.close();
        await new Promise((res) => setTimeout(res, pollMs));
      }
    },
    cancel() {
      closed = true;
    },
  });
}
