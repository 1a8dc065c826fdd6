/**
 * What the node plugin measures, as an interface so the service logic does not depend on
 * prom-client (see `prom_metrics.ts` for the Prometheus implementation).
 *
 * @module
 */

/** Counters and histograms of the node service. */
export interface NodeMetrics {
  /** A finished NodePublishVolume: `result` is `ok` or the gRPC code name. */
  observePublish(result: string, seconds: number): void;
  /** A finished NodeUnpublishVolume. */
  observeUnpublish(result: string, seconds: number): void;
}

/** Metrics that record nothing. */
export const NO_METRICS: NodeMetrics = {
  observePublish() {},
  observeUnpublish() {},
};
