/**
 * Pieces shared by the node and controller pod templates: resources, proxy and CA environment,
 * security contexts and tolerations.
 *
 * @module
 */
import type { Container, EnvVar, Volume, VolumeMount } from "./k8s_objects.ts";
import type { DeployValues, ResourceValues, TolerationValues } from "./values.ts";

/** Where the custom CA bundle is mounted in the node and controller containers. */
export const CA_MOUNT_DIR = "/etc/s3-csi/ca";
/** Name of the CA volume. */
export const CA_VOLUME = "ca-bundle";

/** Non-root uid/gid of the distroless images (`nonroot`). */
export const NONROOT_UID = 65532;

/**
 * Liveness (`/healthz`) and readiness (`/readyz`) probes on the container port named `metrics`,
 * as the controller binaries serve them.
 */
export function metricsPortProbes(): Pick<Container, "livenessProbe" | "readinessProbe"> {
  return {
    livenessProbe: {
      httpGet: { path: "/healthz", port: "metrics" },
      initialDelaySeconds: 10,
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 6,
    },
    readinessProbe: {
      httpGet: { path: "/readyz", port: "metrics" },
      periodSeconds: 5,
      timeoutSeconds: 5,
      failureThreshold: 3,
    },
  };
}

/** The pod security context of the controller binaries' pods: nonroot uid/gid/fsGroup, seccomp. */
export function nonRootPodContext(): Record<string, unknown> {
  return {
    runAsNonRoot: true,
    runAsUser: NONROOT_UID,
    runAsGroup: NONROOT_UID,
    fsGroup: NONROOT_UID,
    seccompProfile: { type: "RuntimeDefault" },
  };
}

/** A container's `resources` without empty groups. */
export function resources(r: ResourceValues): Container["resources"] {
  const clean = (g: Record<string, string | undefined>) =>
    Object.fromEntries(Object.entries(g).filter(([, x]) => x !== undefined && x !== ""));
  const requests = clean(r.requests);
  const limits = clean(r.limits);
  return {
    ...(Object.keys(requests).length ? { requests } : {}),
    ...(Object.keys(limits).length ? { limits } : {}),
  } as Container["resources"];
}

/** HTTP(S)_PROXY / NO_PROXY, upper and lower case (Deno reads either). */
export function proxyEnv(v: DeployValues): EnvVar[] {
  const out: EnvVar[] = [];
  const add = (name: string, value: string) => {
    if (!value) return;
    out.push({ name, value }, { name: name.toLowerCase(), value });
  };
  add("HTTP_PROXY", v.proxy.httpProxy);
  add("HTTPS_PROXY", v.proxy.httpsProxy);
  add("NO_PROXY", v.proxy.noProxy);
  return out;
}

/** Driver credentials from the user's Secret (every key optional), when one is configured. */
export function credentialEnv(v: DeployValues): EnvVar[] {
  const s = v.s3CredentialSecret;
  if (!s.name) return [];
  const ref = (name: string, key: string): EnvVar => ({
    name,
    valueFrom: { secretKeyRef: { name: s.name, key, optional: true } },
  });
  return [
    ref("AWS_ACCESS_KEY_ID", s.accessKeyId),
    ref("AWS_SECRET_ACCESS_KEY", s.secretAccessKey),
    ...(s.sessionToken ? [ref("AWS_SESSION_TOKEN", s.sessionToken)] : []),
  ];
}

/** The first of each name (option-derived variables come first and win). */
export function dedupeEnv(list: readonly EnvVar[]): EnvVar[] {
  const seen = new Set<string>();
  return list.filter((e) => !seen.has(e.name) && seen.add(e.name));
}

/** Env pointing the AWS SDK and Deno's TLS at the mounted CA bundle, when one is configured. */
export function caEnv(v: DeployValues): EnvVar[] {
  if (!v.tls.caCertConfigMap) return [];
  const file = `${CA_MOUNT_DIR}/ca-bundle.crt`;
  return [{ name: "AWS_CA_BUNDLE", value: file }, { name: "DENO_CERT", value: file }];
}

/** The CA volume and mount, when one is configured. */
export function caVolume(v: DeployValues): { volumes: Volume[]; mounts: VolumeMount[] } {
  if (!v.tls.caCertConfigMap) return { volumes: [], mounts: [] };
  return {
    volumes: [{ name: CA_VOLUME, configMap: { name: v.tls.caCertConfigMap } }],
    mounts: [{ name: CA_VOLUME, mountPath: CA_MOUNT_DIR, readOnly: true }],
  };
}

/** Restricted container context: non-root, no privilege escalation, no capabilities, read-only root. */
export function restrictedContext(uid = NONROOT_UID): Record<string, unknown> {
  return {
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: uid,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

/**
 * Root without capabilities, for the node sidecars: they create and connect to root-owned unix
 * sockets in host directories (`plugins_registry/`, the plugin dir), which a non-root uid cannot.
 */
export function rootNoCapabilitiesContext(): Record<string, unknown> {
  return {
    runAsUser: 0,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

/** Tolerations without undefined fields. */
export function tolerations(list: readonly TolerationValues[]): TolerationValues[] {
  return list.map((t) =>
    Object.fromEntries(Object.entries(t).filter(([, x]) => x !== undefined)) as TolerationValues
  );
}

/** `imagePullSecrets` of a pod spec, or nothing. */
export function pullSecrets(v: DeployValues): Record<string, unknown> {
  return v.imagePullSecrets.length
    ? { imagePullSecrets: v.imagePullSecrets.map((name) => ({ name })) }
    : {};
}
