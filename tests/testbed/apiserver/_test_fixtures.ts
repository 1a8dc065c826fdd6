/**
 * Shared fixture of the emulator's unit tests: an {@link ApiRouter} on a fresh {@link Cluster}.
 *
 * @module
 */
import { Cluster } from "./cluster.ts";
import { PodLogs } from "./pod_logs.ts";
import { ApiRouter } from "./router.ts";

/** Base URL of the requests. */
export const BASE = "http://emu";

/** Run `fn` against a router on a fresh cluster. */
export async function withRouter(
  fn: (
    call: (path: string, init?: RequestInit) => Promise<Response>,
    c: Cluster,
    stop: AbortController,
    podLogs: PodLogs,
  ) => Promise<void>,
): Promise<void> {
  const c = new Cluster();
  const stop = new AbortController();
  const podLogs = new PodLogs();
  const r = new ApiRouter(c, {
    token: "tok",
    allowAnonymous: false,
    serverAddress: () => "emu:1",
    signal: stop.signal,
    podLogs,
  });
  const call = (path: string, init: RequestInit = {}) =>
    r.handle(
      new Request(`${BASE}${path}`, {
        ...init,
        headers: { authorization: "Bearer tok", ...init.headers },
      }),
    );
  try {
    await fn(call, c, stop, podLogs);
  } finally {
    stop.abort();
    c.stop();
  }
}
