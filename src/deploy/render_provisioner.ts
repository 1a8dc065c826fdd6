/**
 * The provisioning Deployment `s3-csi-provisioner` (ADR 0010): the `csi-provisioner` sidecar and
 * the driver's CSI Controller service (`s3-csi-controller --reconciler=false`) talking over a unix
 * socket in a shared emptyDir, as the sidecar's own example deployment does
 * (`deploy/kubernetes/deployment.yaml` in `github.com/kubernetes-csi/external-provisioner`).
 *
 * It has its own ServiceAccount, and only the sidecar sees its token: the pod does not automount
 * one, and the sidecar alone mounts a projected token volume shaped like the automounted one
 * (token, `kube-root-ca.crt`, namespace) at the standard path. The driver's container, which holds
 * the S3 credentials and talks to S3, has no Kubernetes API access at all; the sidecar, which may
 * read Secrets and write PersistentVolumes, never sees the driver's S3 credentials.
 *
 * @module
 */
import { CONTROLLER_OPTIONS } from "../options/controller_options.ts";
import { LOG_OPTIONS } from "../util/log.ts";
import type { Container, EnvVar, Manifest, Volume } from "./k8s_objects.ts";
import { commonLabels, PROVISIONER_DEPLOYMENT, PROVISIONER_SERVICE_ACCOUNT } from "./names.ts";
import {
  CA_MOUNT_DIR,
  caEnv,
  caVolume,
  credentialEnv,
  dedupeEnv,
  metricsPortProbes,
  nonRootPodContext,
  pullSecrets,
  resources,
  restrictedContext,
  tolerations,
} from "./pod_parts.ts";
import { optionEnv, optionEnvIfAny, settingArgs } from "./settings.ts";
import { type DeployValues, driverImage } from "./values.ts";

/** Container names. */
export const PROVISIONER_CONTAINERS = {
  /** The driver's CSI Controller service (the controller binary without its reconciler). */
  service: "s3-csi-provisioning",
  provisioner: "csi-provisioner",
} as const;

/** Socket dir shared by the CSI Controller service and csi-provisioner. */
export const PROVISIONER_SOCKET_DIR = "/csi";

/** Where a pod's ServiceAccount token is read from (what automounting would mount). */
export const SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Name of the projected token volume (mounted into csi-provisioner only). */
export const TOKEN_VOLUME = "provisioner-api-access";

const BINARY = "s3-csi-controller";
const SPECS = { ...CONTROLLER_OPTIONS, ...LOG_OPTIONS };

/** Env of the CSI Controller service container; names from the option specs. */
export function provisioningEnv(v: DeployValues): EnvVar[] {
  const e = (name: string, value: string | number | boolean) =>
    optionEnv(SPECS, BINARY, name, value);
  const opt = (name: string, value: string | number | boolean) =>
    optionEnvIfAny(SPECS, BINARY, name, value);
  return dedupeEnv([
    e("reconciler", false),
    e("csi-endpoint", `unix://${PROVISIONER_SOCKET_DIR}/csi.sock`),
    e("metrics-address", `0.0.0.0:${v.controller.metricsPort}`),
    e("log-level", v.controller.logLevel),
    ...(v.s3.endpointUrl ? opt("s3-endpoint-url", v.s3.endpointUrl) : []),
    ...opt("s3-region", v.s3.region),
    ...(v.tls.caCertConfigMap ? opt("s3-ca-bundle", `${CA_MOUNT_DIR}/ca-bundle.crt`) : []),
    ...(v.proxy.httpsProxy || v.proxy.httpProxy
      ? opt("s3-proxy", v.proxy.httpsProxy || v.proxy.httpProxy)
      : []),
    ...credentialEnv(v),
    ...caEnv(v),
  ]);
}

/** The projected volume automounting would create, for the one container that needs it. */
export function tokenVolume(): Volume {
  return {
    name: TOKEN_VOLUME,
    projected: {
      defaultMode: 0o444,
      sources: [
        { serviceAccountToken: { path: "token", expirationSeconds: 3607 } },
        { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
        {
          downwardAPI: {
            items: [{
              path: "namespace",
              fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" },
            }],
          },
        },
      ],
    },
  };
}

/** The Deployment, or nothing when provisioning is disabled. */
export function renderProvisionerDeployment(v: DeployValues): Manifest[] {
  const p = v.provisioner;
  if (!p.enabled) return [];
  const c = v.controller;
  const ca = caVolume(v);
  const socketMount = { name: "socket-dir", mountPath: PROVISIONER_SOCKET_DIR };
  const service: Container = {
    name: PROVISIONER_CONTAINERS.service,
    image: driverImage(v, "controller"),
    imagePullPolicy: v.image.pullPolicy,
    args: settingArgs(c.settings),
    env: provisioningEnv(v),
    ports: [{ name: "metrics", containerPort: c.metricsPort, protocol: "TCP" }],
    volumeMounts: [socketMount, { name: "tmp", mountPath: "/tmp" }, ...ca.mounts],
    resources: resources(c.resources),
    ...metricsPortProbes(),
    securityContext: restrictedContext(),
  };
  const provisioner: Container = {
    name: PROVISIONER_CONTAINERS.provisioner,
    image: v.image.csiProvisioner,
    imagePullPolicy: v.image.pullPolicy,
    args: [
      `--csi-address=${PROVISIONER_SOCKET_DIR}/csi.sock`,
      "--leader-election",
      "--leader-election-namespace=$(POD_NAMESPACE)",
      `--http-endpoint=:${p.httpPort}`,
      `--timeout=${p.timeout}`,
      "--extra-create-metadata",
      "--v=2",
    ],
    env: [{ name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } }],
    ports: [{ name: "provisioner", containerPort: p.httpPort, protocol: "TCP" }],
    volumeMounts: [
      socketMount,
      { name: TOKEN_VOLUME, mountPath: SERVICE_ACCOUNT_MOUNT, readOnly: true },
    ],
    resources: resources(p.resources),
    livenessProbe: {
      httpGet: { path: "/healthz/leader-election", port: "provisioner" },
      initialDelaySeconds: 10,
      periodSeconds: 20,
      timeoutSeconds: 10,
      failureThreshold: 3,
    },
    securityContext: restrictedContext(),
  };
  const volumes: Volume[] = [
    { name: "socket-dir", emptyDir: {} },
    { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } },
    tokenVolume(),
    ...ca.volumes,
  ];
  const selector = { app: PROVISIONER_DEPLOYMENT };
  return [{
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: PROVISIONER_DEPLOYMENT,
      namespace: v.namespace,
      labels: commonLabels(v, "provisioner"),
    },
    spec: {
      replicas: p.replicas,
      selector: { matchLabels: selector },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: { labels: { ...commonLabels(v, "provisioner"), ...selector } },
        spec: {
          serviceAccountName: PROVISIONER_SERVICE_ACCOUNT,
          // Only csi-provisioner mounts the token (see tokenVolume()).
          automountServiceAccountToken: false,
          priorityClassName: "system-cluster-critical",
          nodeSelector: { "kubernetes.io/os": "linux", ...c.nodeSelector },
          ...(c.tolerations.length ? { tolerations: tolerations(c.tolerations) } : {}),
          securityContext: nonRootPodContext(),
          terminationGracePeriodSeconds: 30,
          ...pullSecrets(v),
          containers: [service, provisioner],
          volumes,
        },
      },
    },
  }];
}
