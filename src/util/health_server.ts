/**
 * A small HTTP server for `/metrics` (Prometheus text), `/healthz` (the process runs) and `/readyz`
 * (the owner's readiness check).
 *
 * @module
 */
import { ConfigError } from "./errors.ts";
import { logger } from "./log.ts";

/** Options of {@link startHealthServer}. */
export interface HealthServerOptions {
  /** `host:port`; port 0 picks a free one. */
  readonly address: string;
  readonly metrics?: () => Promise<{ contentType: string; body: string }>;
  readonly ready?: () => boolean;
  readonly signal: AbortSignal;
}

/** Parse `host:port` (`:8080` means all interfaces). @throws {ConfigError} */
export function parseAddress(address: string): { hostname: string; port: number } {
  const m = /^(.*):(\d{1,5})$/.exec(address.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) {
    throw new ConfigError(`address "${address}" must be host:port, e.g. 127.0.0.1:8080 or :8080`);
  }
  return { hostname: m[1] || "0.0.0.0", port };
}

/** Start serving; resolves with the bound port. Stops when `signal` aborts. */
export function startHealthServer(
  o: HealthServerOptions,
): Promise<{ port: number; finished: Promise<void> }> {
  const { hostname, port } = parseAddress(o.address);
  const log = logger("http");
  const server = Deno.serve(
    { hostname, port, signal: o.signal, onListen: () => {} },
    async (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/healthz") return new Response("ok\n");
      if (path === "/readyz") {
        return (o.ready?.() ?? true)
          ? new Response("ok\n")
          : new Response("not ready\n", { status: 503 });
      }
      if (path === "/metrics" && o.metrics) {
        const m = await o.metrics();
        return new Response(m.body, { headers: { "content-type": m.contentType } });
      }
      return new Response("not found\n", { status: 404 });
    },
  );
  const addr = server.addr;
  log.info("Serving /metrics, /healthz, /readyz on {address}", {
    address: `${addr.hostname}:${addr.port}`,
  });
  return Promise.resolve({ port: addr.port, finished: server.finished });
}
