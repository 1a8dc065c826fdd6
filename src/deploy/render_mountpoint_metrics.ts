/**
 * The headless Service `s3-csi-mountpoint-metrics` in the Mountpoint namespace: it selects every
 * Mountpoint Pod by its component label and names their `metrics` port, where each pod's engine
 * serves its volume's Prometheus figures (labelled `volume`, `volume_id`, `mountpoint_pod`). A
 * ServiceMonitor can select it (label `app.kubernetes.io/component: mountpoint-pods`), a PodMonitor
 * the pods themselves (`app.kubernetes.io/name: s3-csi-mountpoint`, port `metrics`), and plain
 * Prometheus finds the pods by their `prometheus.io/*` annotations. Not rendered when
 * `mountpointPod.metricsPort` is 0.
 *
 * @module
 */
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../mppod/labels.ts";
import { METRICS_PORT_NAME } from "../mppod/engine_metrics.ts";
import type { Manifest } from "./k8s_objects.ts";
import { commonLabels, MOUNTPOINT_METRICS_SERVICE } from "./names.ts";
import type { DeployValues } from "./values.ts";

/** The Service, or nothing when the Mountpoint Pods serve no metrics. */
export function renderMountpointMetricsService(v: DeployValues): Manifest[] {
  const port = v.mountpointPod.metricsPort;
  if (port === 0) return [];
  return [{
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: MOUNTPOINT_METRICS_SERVICE,
      namespace: v.mountpointPod.namespace,
      labels: commonLabels(v, "mountpoint-pods"),
    },
    spec: {
      clusterIP: "None",
      selector: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
      ports: [{ name: METRICS_PORT_NAME, port, targetPort: METRICS_PORT_NAME, protocol: "TCP" }],
    },
  }];
}
