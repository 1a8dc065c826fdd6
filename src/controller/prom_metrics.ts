/**
 * {@link ControllerMetrics} on prom-client, exposed in the Prometheus text format.
 *
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ControllerMetrics } from "./metrics.ts";

/** Prometheus metrics of the controller. */
export class PromControllerMetrics implements ControllerMetrics {
  /** The registry to serve on `/metrics`. */
  readonly registry: Registry = new Registry();
  readonly #reconciles = new Counter({
    name: "s3csi_controller_reconciles_total",
    help: "Reconciles by result",
    labelNames: ["result"],
    registers: [this.registry],
  });
  readonly #latency = new Histogram({
    name: "s3csi_controller_reconcile_duration_seconds",
    help: "Reconcile latency",
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });
  readonly #ready = new Histogram({
    name: "s3csi_controller_mountpoint_pod_ready_seconds",
    help: "Workload scheduled to its new Mountpoint Pod Running",
    buckets: [0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly #createFailed = new Counter({
    name: "s3csi_controller_mountpoint_pod_create_failures_total",
    help: "Failed Mountpoint Pod creations",
    registers: [this.registry],
  });
  readonly #apiErrors = new Counter({
    name: "s3csi_controller_api_errors_total",
    help: "Failed Kubernetes API calls by verb",
    labelNames: ["verb"],
    registers: [this.registry],
  });
  readonly #attachments = new Gauge({
    name: "s3csi_controller_attachments",
    help: "MountpointS3PodAttachments",
    registers: [this.registry],
  });
  readonly #workloads = new Gauge({
    name: "s3csi_controller_attached_workloads",
    help: "Workload Pods attached to Mountpoint Pods",
    registers: [this.registry],
  });
  readonly #pods = new Gauge({
    name: "s3csi_controller_mountpoint_pods",
    help: "Mountpoint Pods by phase",
    labelNames: ["phase"],
    registers: [this.registry],
  });

  #requestCounts: (() => Readonly<Record<string, number>>) | undefined;
  readonly #requests: Counter<"verb"> = new Counter({
    name: "s3csi_controller_api_requests_total",
    help:
      "Kubernetes API requests sent by the reconciler, by verb (GET, LIST, WATCH, POST, PUT, PATCH, DELETE)",
    labelNames: ["verb"],
    registers: [this.registry],
    collect: () => {
      const counts = this.#requestCounts?.();
      if (!counts) return;
      this.#requests.reset();
      for (const [verb, n] of Object.entries(counts)) this.#requests.inc({ verb }, n);
    },
  });

  /** Report the request counts `counts()` returns (read at each scrape). */
  trackRequests(counts: () => Readonly<Record<string, number>>): void {
    this.#requestCounts = counts;
  }

  /** @inheritdoc */
  reconcile(outcome: "success" | "requeue" | "error", seconds: number): void {
    this.#reconciles.inc({ result: outcome });
    this.#latency.observe(seconds);
  }

  /** @inheritdoc */
  mountpointPodReady(seconds: number): void {
    this.#ready.observe(seconds);
  }

  /** @inheritdoc */
  mountpointPodCreateFailed(): void {
    this.#createFailed.inc();
  }

  /** @inheritdoc */
  apiError(verb: string): void {
    this.#apiErrors.inc({ verb });
  }

  /** @inheritdoc */
  gauges(
    values: { attachments: number; workloads: number; podsByPhase: Record<string, number> },
  ): void {
    this.#attachments.set(values.attachments);
    this.#workloads.set(values.workloads);
    this.#pods.reset();
    for (const [phase, n] of Object.entries(values.podsByPhase)) this.#pods.set({ phase }, n);
  }
}
