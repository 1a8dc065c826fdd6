/**
 * The controller Deployment `s3-csi-controller`: the reconciler alone (Mountpoint Pods and
 * attachments), under its own ServiceAccount. Dynamic provisioning runs in a separate Deployment
 * (`render_provisioner.ts`) so that neither identity holds the other's permissions (ADR 0010).
 * Environment variable names come from `CONTROLLER_OPTIONS`.
 *
 * @module
 */
import { CONTROLLER_OPTIONS } from "../options/controller_options.ts";
import { LOG_OPTIONS } from "../util/log.ts";
import type { Container, EnvVar, Manifest, Volume } from "./k8s_objects.ts";
import { commonLabels, CONTROLLER_DEPLOYMENT, CONTROLLER_SERVICE_ACCOUNT } from "./names.ts";
import {
  dedupeEnv,
  metricsPortProbes,
  nonRootPodContext,
  pullSecrets,
  resources,
  restrictedContext,
  tolerations,
} from "./pod_parts.ts";
import { optionEnv, optionFieldEnv, settingArgs } from "./settings.ts";
import { type DeployValues, driverImage, headroomOn } from "./values.ts";

/** Container names. */
export const CONTROLLER_CONTAINERS = {
  controller: "s3-csi-controller",
} as const;

const BINARY = "s3-csi-controller";
const SPECS = { ...CONTROLLER_OPTIONS, ...LOG_OPTIONS };

/** Env of the controller container; names from the option specs. */
export function controllerEnv(v: DeployValues): EnvVar[] {
  const m = v.mountpointPod;
  const e = (name: string, value: string | number | boolean) =>
    optionEnv(SPECS, BINARY, name, value);
  return dedupeEnv([
    e("mountpoint-namespace", m.namespace),
    e("mountpoint-image", driverImage(v, "mounter")),
    e("mountpoint-image-pull-policy", v.image.pullPolicy),
    e("mountpoint-priority-class-name", m.priorityClassName),
    ...(headroomOn(v)
      ? [
        e("mountpoint-preempting-priority-class-name", m.preemptingPriorityClassName),
        e("mountpoint-headroom-priority-class-name", m.headroomPriorityClassName),
        e("mountpoint-headroom-image", m.headroomImage),
      ]
      : []),
    e("mountpoint-uid", m.uid),
    e("mountpoint-command", m.command),
    e("mountpoint-work-size-limit", m.workSizeLimit),
    e("mountpoint-cache-size-limit", m.cacheSizeLimit),
    e("mountpoint-cpu-request", m.resources.requests.cpu ?? ""),
    e("mountpoint-memory-request", m.resources.requests.memory ?? ""),
    e("mountpoint-memory-limit", m.resources.limits.memory ?? ""),
    e("mountpoint-metrics-port", m.metricsPort),
    e("tls-ca-configmap", v.tls.caCertConfigMap),
    e("leader-elect", true),
    optionFieldEnv(SPECS, BINARY, "leader-election-namespace", "metadata.namespace"),
    e("metrics-address", `0.0.0.0:${v.controller.metricsPort}`),
    e("log-level", v.controller.logLevel),
    // Not a setting: the controller's leader identity (falls back to the hostname).
    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
  ]);
}

/** The Deployment. */
export function renderControllerDeployment(v: DeployValues): Manifest {
  const c = v.controller;
  const controller: Container = {
    name: CONTROLLER_CONTAINERS.controller,
    image: driverImage(v, "controller"),
    imagePullPolicy: v.image.pullPolicy,
    args: settingArgs(c.settings),
    env: controllerEnv(v),
    ports: [{ name: "metrics", containerPort: c.metricsPort, protocol: "TCP" }],
    volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
    resources: resources(c.resources),
    ...metricsPortProbes(),
    securityContext: restrictedContext(),
  };
  const volumes: Volume[] = [{ name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } }];
  const selector = { app: CONTROLLER_DEPLOYMENT };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: CONTROLLER_DEPLOYMENT,
      namespace: v.namespace,
      labels: commonLabels(v, "controller"),
    },
    spec: {
      replicas: c.replicas,
      selector: { matchLabels: selector },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels: { ...commonLabels(v, "controller"), ...selector } },
        spec: {
          serviceAccountName: CONTROLLER_SERVICE_ACCOUNT,
          priorityClassName: "system-cluster-critical",
          nodeSelector: { "kubernetes.io/os": "linux", ...c.nodeSelector },
          ...(c.tolerations.length ? { tolerations: tolerations(c.tolerations) } : {}),
          securityContext: nonRootPodContext(),
          terminationGracePeriodSeconds: 30,
          ...pullSecrets(v),
          containers: [controller],
          volumes,
        },
      },
    },
  };
}
