/**
 * Controller metrics. The reconciler depends on this small interface; `prom_metrics.ts` implements
 * it with prom-client for `/metrics`, and {@link NO_METRICS} serves tests.
 *
 * @module
 */

/** What the reconciler reports. */
export interface ControllerMetrics {
  /** One reconcile finished. */
  reconcile(outcome: "success" | "requeue" | "error", seconds: number): void;
  /** A Mountpoint Pod became Running, `seconds` after its first workload was scheduled. */
  mountpointPodReady(seconds: number): void;
  /** Creating a Mountpoint Pod failed. */
  mountpointPodCreateFailed(): void;
  /** An API call failed (`verb` such as create/update/patch/delete). */
  apiError(verb: string): void;
  /** Current gauges, refreshed periodically. */
  gauges(
    values: { attachments: number; workloads: number; podsByPhase: Record<string, number> },
  ): void;
}

/** Metrics that go nowhere. */
export const NO_METRICS: ControllerMetrics = {
  reconcile() {},
  mountpointPodReady() {},
  mountpointPodCreateFailed() {},
  apiError() {},
  gauges() {},
};
