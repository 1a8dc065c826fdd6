/**
 * The node DaemonSet `s3-csi-node`: the node plugin with the `csi-node-driver-registrar` and
 * `livenessprobe` sidecars, laid out like the upstream chart's `templates/node.yaml`
 * (`github.com/scality/mountpoint-s3-csi-driver`) and the sidecars' READMEs
 * (`github.com/kubernetes-csi/node-driver-registrar`, `github.com/kubernetes-csi/livenessprobe`).
 *
 * Paths come from `src/mppod/paths.ts`, environment variable names from `NODE_OPTIONS`. The kubelet
 * root is mounted at the same path in the container with `Bidirectional` propagation: the plugin's
 * FUSE source mounts (`<kubelet>/plugins/<driver>/mnt`) and the bind mounts into pod target paths
 * (`<kubelet>/pods/…`) must reach the host, and the Mountpoint Pods' comm dirs are read through it.
 * The plugin dir (the socket dir) holds the source mounts too (`mnt/`): every container mounts it
 * with `HostToContainer` propagation, so the copies of the sources a (re)started container gets
 * follow the host and go when the host unmounts them — a private copy would keep the FUSE
 * connection of a released Mountpoint Pod alive for as long as that container runs.
 *
 * @module
 */
import { TAINT_AGENT_NOT_READY } from "../mppod/labels.ts";
import { pluginDir } from "../mppod/paths.ts";
import { NODE_OPTIONS } from "../options/node_options.ts";
import { LOG_OPTIONS } from "../util/log.ts";
import type { Container, EnvVar, Manifest, Volume } from "./k8s_objects.ts";
import { commonLabels, NODE_DAEMONSET, NODE_SERVICE_ACCOUNT } from "./names.ts";
import {
  caEnv,
  caVolume,
  credentialEnv,
  proxyEnv,
  pullSecrets,
  resources,
  rootNoCapabilitiesContext,
  tolerations,
} from "./pod_parts.ts";
import { optionEnv, optionFieldEnv, settingArgs } from "./settings.ts";
import { type DeployValues, driverImage, type TolerationValues } from "./values.ts";

/** Container names. */
export const NODE_CONTAINERS = {
  plugin: "s3-plugin",
  registrar: "node-driver-registrar",
  liveness: "liveness-probe",
} as const;

/** Directory of the CSI socket inside the node containers (the host plugin dir is mounted here). */
export const NODE_SOCKET_DIR = "/csi";
/**
 * The plugin dir in every node container: `HostToContainer`, because it also holds the FUSE
 * source mounts (see the module doc).
 */
const PLUGIN_DIR_MOUNT = {
  name: "plugin-dir",
  mountPath: NODE_SOCKET_DIR,
  mountPropagation: "HostToContainer",
} as const;
/** The node plugin's CSI endpoint inside its container. */
export const NODE_CSI_ENDPOINT = `unix://${NODE_SOCKET_DIR}/csi.sock`;
/** Kubelet's plugin registration directory, relative to the kubelet root. */
export const REGISTRATION_DIR = "plugins_registry";

const BINARY = "s3-csi-node";
const SPECS = { ...NODE_OPTIONS, ...LOG_OPTIONS };

/** Default tolerations: critical add-ons, the startup taint, and NoExecute for 300 s. */
export function defaultNodeTolerations(): TolerationValues[] {
  return [
    { key: "CriticalAddonsOnly", operator: "Exists" },
    { key: TAINT_AGENT_NOT_READY, operator: "Exists" },
    { operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
  ];
}

/** Env of the node plugin container; names from the option specs. */
export function nodePluginEnv(v: DeployValues): EnvVar[] {
  const n = v.node;
  return [
    optionEnv(SPECS, BINARY, "endpoint", NODE_CSI_ENDPOINT),
    optionFieldEnv(SPECS, BINARY, "node-id", "spec.nodeName"),
    optionEnv(SPECS, BINARY, "kubelet-path", n.kubeletPath),
    optionEnv(SPECS, BINARY, "mountpoint-namespace", v.mountpointPod.namespace),
    // What a Mountpoint Pod must be (as the controller renders it) before it gets credentials.
    optionEnv(SPECS, BINARY, "mountpoint-image", driverImage(v, "mounter")),
    optionEnv(SPECS, BINARY, "mountpoint-command", v.mountpointPod.command),
    optionEnv(SPECS, BINARY, "mountpoint-uid", v.mountpointPod.uid),
    optionEnv(SPECS, BINARY, "mountpoint-cache-size-limit", v.mountpointPod.cacheSizeLimit),
    optionEnv(SPECS, BINARY, "metrics-port", n.metricsPort),
    ...(v.s3.endpointUrl ? [optionEnv(SPECS, BINARY, "s3-endpoint-url", v.s3.endpointUrl)] : []),
    optionEnv(SPECS, BINARY, "s3-region", v.s3.region),
    ...(v.podIdentity.audience
      ? [optionEnv(SPECS, BINARY, "pod-identity-audience", v.podIdentity.audience)]
      : []),
    optionEnv(SPECS, BINARY, "log-level", n.logLevel),
    ...proxyEnv(v),
    ...credentialEnv(v),
    ...caEnv(v),
  ];
}

/** The DaemonSet. */
export function renderNodeDaemonSet(v: DeployValues): Manifest {
  const n = v.node;
  const kubelet = n.kubeletPath.replace(/\/+$/, "") || "/";
  const plugin = pluginDir(kubelet);
  const ca = caVolume(v);
  const sidecarResources = resources(v.sidecars.resources);
  const pull = v.image.pullPolicy;
  const pluginContainer: Container = {
    name: NODE_CONTAINERS.plugin,
    image: driverImage(v, "node"),
    imagePullPolicy: pull,
    args: settingArgs(n.settings),
    env: nodePluginEnv(v),
    ports: [
      { name: "healthz", containerPort: n.healthPort, protocol: "TCP" },
      ...(n.metricsPort
        ? [{ name: "metrics", containerPort: n.metricsPort, protocol: "TCP" }]
        : []),
    ],
    volumeMounts: [
      { name: "kubelet-dir", mountPath: kubelet, mountPropagation: "Bidirectional" },
      PLUGIN_DIR_MOUNT,
      { name: "fuse-device", mountPath: "/dev/fuse" },
      { name: "tmp", mountPath: "/tmp" },
      ...ca.mounts,
    ],
    resources: resources(n.resources),
    // The livenessprobe sidecar answers /healthz with the plugin's Identity.Probe.
    livenessProbe: {
      httpGet: { path: "/healthz", port: "healthz" },
      initialDelaySeconds: 10,
      timeoutSeconds: 5,
      periodSeconds: 10,
      failureThreshold: 5,
    },
    readinessProbe: {
      httpGet: { path: "/healthz", port: "healthz" },
      periodSeconds: 5,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
    // Privileged: mount(2)/umount2(2) of FUSE and bind mounts, /dev/fuse, and Bidirectional
    // propagation (which Kubernetes allows only in privileged containers).
    securityContext: { privileged: true, runAsUser: 0, readOnlyRootFilesystem: true },
  };
  const registrar: Container = {
    name: NODE_CONTAINERS.registrar,
    image: v.image.nodeDriverRegistrar,
    imagePullPolicy: pull,
    args: [
      `--csi-address=${NODE_SOCKET_DIR}/csi.sock`,
      `--kubelet-registration-path=${plugin}/csi.sock`,
      `--http-endpoint=:${n.registrarHealthPort}`,
      "--v=2",
    ],
    ports: [{ name: "registrar", containerPort: n.registrarHealthPort, protocol: "TCP" }],
    volumeMounts: [
      PLUGIN_DIR_MOUNT,
      { name: "registration-dir", mountPath: "/registration" },
    ],
    resources: sidecarResources,
    livenessProbe: {
      httpGet: { path: "/healthz", port: "registrar" },
      initialDelaySeconds: 5,
      timeoutSeconds: 5,
      periodSeconds: 30,
      failureThreshold: 3,
    },
    securityContext: rootNoCapabilitiesContext(),
  };
  const liveness: Container = {
    name: NODE_CONTAINERS.liveness,
    image: v.image.livenessProbe,
    imagePullPolicy: pull,
    args: [
      `--csi-address=${NODE_SOCKET_DIR}/csi.sock`,
      `--http-endpoint=:${n.healthPort}`,
      "--probe-timeout=3s",
      "--v=2",
    ],
    volumeMounts: [PLUGIN_DIR_MOUNT],
    resources: sidecarResources,
    // Its own liveness: its listener answers (whether the plugin is healthy is the plugin's probe).
    livenessProbe: {
      tcpSocket: { port: n.healthPort },
      initialDelaySeconds: 10,
      periodSeconds: 30,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
    securityContext: rootNoCapabilitiesContext(),
  };
  const volumes: Volume[] = [
    { name: "kubelet-dir", hostPath: { path: kubelet, type: "Directory" } },
    { name: "plugin-dir", hostPath: { path: `${plugin}/`, type: "DirectoryOrCreate" } },
    {
      name: "registration-dir",
      hostPath: { path: `${kubelet}/${REGISTRATION_DIR}/`, type: "Directory" },
    },
    { name: "fuse-device", hostPath: { path: "/dev/fuse", type: "CharDevice" } },
    { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } },
    ...ca.volumes,
  ];
  const selector = { app: NODE_DAEMONSET };
  const tolerationList = n.tolerateAllTaints
    ? [{ operator: "Exists" as const }]
    : [...(n.defaultTolerations ? defaultNodeTolerations() : []), ...n.tolerations];
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: NODE_DAEMONSET, namespace: v.namespace, labels: commonLabels(v, "node") },
    spec: {
      selector: { matchLabels: selector },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "10%" } },
      template: {
        metadata: { labels: { ...commonLabels(v, "node"), ...selector } },
        spec: {
          serviceAccountName: NODE_SERVICE_ACCOUNT,
          priorityClassName: "system-node-critical",
          nodeSelector: { "kubernetes.io/os": "linux", ...n.nodeSelector },
          tolerations: tolerations(tolerationList),
          terminationGracePeriodSeconds: 30,
          ...pullSecrets(v),
          containers: [pluginContainer, registrar, liveness],
          volumes,
        },
      },
    },
  };
}
