/**
 * Programmatic entry point of the Kubernetes API emulator: {@link startApiServer} serves the
 * {@link Cluster} over HTTPS (self-signed) or HTTP, writes a kubeconfig, and returns a handle
 * with `stop()` plus hooks tests use to force client behaviour (closing all watches, expiring
 * watch history so resumes get 410).
 *
 * @example
 * ```ts
 * const api = await startApiServer({ port: 0 });
 * // KUBECONFIG=api.kubeconfigPath kubectl get pods
 * await api.stop();
 * ```
 *
 * @module
 */
import { PodLogs } from "./pod_logs.ts";
import { Cluster } from "./cluster.ts";
import { renderKubeconfig } from "./kubeconfig.ts";
import type { ObjectStore } from "./object_store.ts";
import { ApiRouter } from "./router.ts";
import { generateServingCert } from "./tls.ts";
import { logger } from "../../../src/util/log.ts";

const log = logger("apiserver");

/** Upper bound of a graceful shutdown; connections still open after it are left to the clients. */
const SHUTDOWN_TIMEOUT_MS = 2000;
const WATCH_QUERY_REGEXP = /[?&]watch=(true|1)(&|$)/;

/** Options of {@link startApiServer}. */
export interface ApiServerOptions {
  /** TCP port; 0 picks a free one. @default 0 */
  readonly port?: number;
  /** Listen address. @default "127.0.0.1" */
  readonly host?: string;
  /**
   * Serve HTTPS with a generated self-signed certificate (kubectl then authenticates with the
   * token). Plain HTTP accepts anonymous requests as admin; it is the default because in-process
   * TLS clients make Deno stall (and occasionally crash) at shutdown. @default false
   */
  readonly tls?: boolean;
  /** Bearer token clients must send. @default a random token */
  readonly token?: string;
  /** Where to write the kubeconfig. @default a new temporary file */
  readonly kubeconfigPath?: string;
  /** See {@link ClusterOptions.podTerminationMs}. */
  readonly podTerminationMs?: number;
  /** Watch bookmark period. @default 60000 */
  readonly bookmarkIntervalMs?: number;
  /** Watch history length. @default 10000 */
  readonly historySize?: number;
  /** Stops the server when aborted. */
  readonly signal?: AbortSignal;
}

/** A running emulator. */
export interface ApiServer {
  /** Base URL, e.g. `https://127.0.0.1:39123`. */
  readonly url: string;
  /** Path of the kubeconfig written at start. */
  readonly kubeconfigPath: string;
  /** Bearer token. */
  readonly token: string;
  /** Raw object storage (resourceVersions, history). */
  readonly store: ObjectStore;
  /** The cluster (typed writes, registry). */
  readonly cluster: Cluster;
  /** Kubelets serving `kubectl logs` (`pods/log`), registered by node name. */
  readonly podLogs: PodLogs;
  /** End every open watch; clients reconnect from their last resourceVersion. */
  closeAllWatches(): void;
  /** Drop the watch history so that any resume from an older resourceVersion gets 410. */
  expireHistory(): void;
  /** Stop serving and release the port; idempotent. */
  stop(): Promise<void>;
  /** Resolves when the server has stopped. */
  readonly finished: Promise<void>;
}

/** Start an emulator. */
export async function startApiServer(options: ApiServerOptions = {}): Promise<ApiServer> {
  const host = options.host ?? "127.0.0.1";
  const tls = options.tls ?? false;
  const token = options.token ?? crypto.randomUUID().replaceAll("-", "");
  const cert = tls ? await generateServingCert(host, options.signal) : undefined;
  const cluster = new Cluster({
    ...(options.podTerminationMs !== undefined
      ? { podTerminationMs: options.podTerminationMs }
      : {}),
    ...(options.historySize !== undefined ? { historySize: options.historySize } : {}),
  });
  const stopper = new AbortController();
  let address = "";
  const podLogs = new PodLogs();
  const router = new ApiRouter(cluster, {
    token,
    allowAnonymous: !tls,
    serverAddress: () => address,
    signal: stopper.signal,
    podLogs,
    ...(options.bookmarkIntervalMs !== undefined
      ? { bookmarkIntervalMs: options.bookmarkIntervalMs }
      : {}),
  });
  const server = Deno.serve({
    port: options.port ?? 0,
    hostname: host,
    ...(cert ? { cert: cert.cert, key: cert.key } : {}),
    onListen: () => {},
    onError: (err) => {
      log.error("Unhandled server error: {error}", { error: String(err) });
      return new Response("internal error", { status: 500 });
    },
  }, async (req) => {
    const res = await router.handle(req);
    // Idle keep-alive connections would hold up a graceful shutdown for seconds; local clients
    // reconnect cheaply. Watches are long-lived anyway and end on stop().
    if (!WATCH_QUERY_REGEXP.test(req.url)) res.headers.set("connection", "close");
    return res;
  });
  const port = server.addr.port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  address = `${urlHost}:${port}`;
  const url = `${tls ? "https" : "http"}://${address}`;
  const kubeconfigPath = options.kubeconfigPath ??
    await Deno.makeTempFile({ prefix: "s3csi-apiserver-", suffix: ".kubeconfig" });
  // Write-then-rename so that a watcher never reads a half-written file: existence = ready.
  const partial = `${kubeconfigPath}.${crypto.randomUUID().slice(0, 8)}.tmp`;
  await Deno.writeTextFile(partial, renderKubeconfig({ server: url, token }), { mode: 0o600 });
  await Deno.rename(partial, kubeconfigPath);
  log.info("Kubernetes API emulator listening on {url}, kubeconfig {kubeconfig}", {
    url,
    kubeconfig: kubeconfigPath,
  });
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      stopper.abort();
      cluster.store.hub.closeAll();
      cluster.stop();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        server.shutdown(),
        new Promise((r) => timer = setTimeout(r, SHUTDOWN_TIMEOUT_MS)),
      ]);
      clearTimeout(timer);
    })();
    return stopping;
  };
  options.signal?.addEventListener("abort", () => void stop(), { once: true });
  return {
    url,
    kubeconfigPath,
    token,
    store: cluster.store,
    cluster,
    podLogs,
    closeAllWatches: () => cluster.store.hub.closeAll(),
    expireHistory: () => cluster.store.hub.compact(cluster.store.resourceVersion),
    stop,
    finished: server.finished,
  };
}
