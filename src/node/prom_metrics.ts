/**
 * {@link NodeMetrics} on prom-client, plus gauges computed at scrape time from the mount table:
 * active source mounts, active bind mounts (targets) and unhealthy mounts (sources whose FUSE
 * server does not answer). Served in the Prometheus text format by {@link serveMetrics}.
 *
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { sourceMountRoot } from "../mppod/paths.ts";
import type { Sys } from "../sys/sys.ts";
import { logger } from "../util/log.ts";
import type { HealthChecker } from "./health.ts";
import type { NodeMetrics } from "./metrics.ts";

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Counts of mounts at one instant. */
export interface MountCounts {
  readonly sources: number;
  readonly binds: number;
  readonly unhealthy: number;
}

/**
 * Count our source mounts, their bind mounts and the dead sources (through the shared
 * {@link HealthChecker}: a hung mount costs one blocked probe, however often it is scraped).
 */
export async function countMounts(
  sys: Sys,
  health: HealthChecker,
  kubeletRoot: string,
): Promise<MountCounts> {
  const mounts = await sys.readMountInfo();
  const root = `${sourceMountRoot(kubeletRoot)}/`;
  const sources = mounts.filter((m) =>
    m.mountPoint.startsWith(root) && m.fsType.startsWith("fuse")
  );
  const devices = new Set(sources.map((m) => m.majorMinor));
  const binds = mounts.filter((m) => devices.has(m.majorMinor) && !m.mountPoint.startsWith(root));
  const results = await Promise.all(sources.map((s) => health.check(s.mountPoint, s.mountPoint)));
  const unhealthy = results.filter((r) => r.state === "dead" || r.state === "hung").length;
  return { sources: sources.length, binds: binds.length, unhealthy };
}

/** Prometheus metrics of the node plugin. */
export class PromNodeMetrics implements NodeMetrics {
  /** The registry to serve. */
  readonly registry: Registry = new Registry();
  readonly #calls = new Counter({
    name: "s3csi_node_operations_total",
    help: "NodePublishVolume / NodeUnpublishVolume calls by result (OK or gRPC code)",
    labelNames: ["operation", "result"],
    registers: [this.registry],
  });
  readonly #latency = new Histogram({
    name: "s3csi_node_operation_duration_seconds",
    help: "NodePublishVolume / NodeUnpublishVolume latency by result",
    labelNames: ["operation", "result"],
    buckets: BUCKETS,
    registers: [this.registry],
  });

  /** Create metrics; the mount gauges read the mount table at scrape time. */
  constructor(deps: { sys: Sys; health: HealthChecker; kubeletRoot: string }) {
    let last: Promise<MountCounts> | undefined;
    const counts = () => (last ??= countMounts(deps.sys, deps.health, deps.kubeletRoot).finally(
      () => setTimeout(() => (last = undefined), 100),
    ));
    const gauge = (name: string, help: string, key: keyof MountCounts) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          this.set((await counts())[key]);
        },
      });
    gauge(
      "s3csi_node_source_mounts",
      "Active FUSE source mounts (one per Mountpoint Pod)",
      "sources",
    );
    gauge("s3csi_node_bind_mounts", "Active bind mounts into workload pods", "binds");
    gauge("s3csi_node_unhealthy_mounts", "Source mounts whose engine does not answer", "unhealthy");
  }

  /** @inheritdoc */
  observePublish(result: string, seconds: number): void {
    this.#calls.inc({ operation: "publish", result });
    this.#latency.observe({ operation: "publish", result }, seconds);
  }

  /** @inheritdoc */
  observeUnpublish(result: string, seconds: number): void {
    this.#calls.inc({ operation: "unpublish", result });
    this.#latency.observe({ operation: "unpublish", result }, seconds);
  }
}

/** Serve `/metrics` on `port` (all interfaces) until `signal` aborts; returns the bound port. */
export function serveMetrics(registry: Registry, port: number, signal: AbortSignal): number {
  const log = logger("node", "metrics");
  const server = Deno.serve(
    { port, hostname: "0.0.0.0", signal, onListen: () => {} },
    async (req) => {
      if (new URL(req.url).pathname !== "/metrics") {
        return new Response("not found\n", {
          status: 404,
        });
      }
      return new Response(await registry.metrics(), {
        headers: { "content-type": registry.contentType },
      });
    },
  );
  log.info("Serving metrics on :{port}/metrics", { port: server.addr.port });
  return server.addr.port;
}
