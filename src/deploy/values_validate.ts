/**
 * Merge user overrides into the defaults and check the result. Every problem is collected and
 * reported at once, each as `<path>: <what is wrong>` (e.g. `node.resources.limits.memory: must be
 * a quantity ≥ 0 such as 64Mi, got "-1Mi"`), before anything is rendered or applied.
 *
 * @module
 */
import { CONTROLLER_OPTIONS } from "../options/controller_options.ts";
import { NODE_OPTIONS } from "../options/node_options.ts";
import { type OptionSpecs, parseDuration } from "../util/config.ts";
import { ConfigError } from "../util/errors.ts";
import { versionProblem } from "../util/version.ts";
import { imageProblem } from "./image_ref.ts";
import { parseQuantity } from "../kube/quantity.ts";
import { defaultValues, type DeployValues, type ResourceValues } from "./values.ts";
import { MANAGED_CONTROLLER_SETTINGS, MANAGED_NODE_SETTINGS } from "./settings.ts";

/** Invalid values; `problems` lists each one as `path: message`. */
export class ValuesError extends ConfigError {
  /** One entry per problem. */
  readonly problems: readonly string[];
  /** Build from the problem list. */
  constructor(problems: readonly string[]) {
    super(`Invalid deployment values:\n- ${problems.join("\n- ")}`);
    this.name = "ValuesError";
    this.problems = problems;
  }
}

/** Paths whose value is a free-form map (string → string) rather than a fixed set of fields. */
const MAP_PATHS = new Set([
  "customLabels",
  "node.nodeSelector",
  "controller.nodeSelector",
  "node.settings",
  "controller.settings",
]);

const TOLERATION_KEYS = new Set(["key", "operator", "value", "effect", "tolerationSeconds"]);
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function show(v: unknown): string {
  return JSON.stringify(v) ?? String(v);
}

/** Merge `override` into `base` (objects recursively, everything else replaced), collecting shape problems. */
function merge(base: unknown, override: unknown, path: string, problems: string[]): unknown {
  if (override === undefined || override === null) return base;
  if (MAP_PATHS.has(path) || /\.resources\.(requests|limits)$/.test(path)) {
    if (!isObject(override)) {
      problems.push(`${path}: must be a map of strings, got ${show(override)}`);
      return base;
    }
    const out: Record<string, string> = { ...(base as Record<string, string>) };
    for (const [k, v] of Object.entries(override)) {
      if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") {
        out[k] = String(v);
      } else problems.push(`${path}.${k}: must be a string, got ${show(v)}`);
    }
    return out;
  }
  if (isObject(base)) {
    if (!isObject(override)) {
      problems.push(`${path || "values"}: must be an object, got ${show(override)}`);
      return base;
    }
    const out: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(override)) {
      const p = path ? `${path}.${k}` : k;
      if (!(k in base)) {
        const known = Object.keys(base).join(", ");
        problems.push(`${p}: unknown key (known keys here: ${known})`);
        continue;
      }
      out[k] = merge(base[k], v, p, problems);
    }
    return out;
  }
  if (Array.isArray(base)) {
    if (!Array.isArray(override)) {
      problems.push(`${path}: must be a list, got ${show(override)}`);
      return base;
    }
    return override;
  }
  if (typeof base !== typeof override) {
    if (typeof base === "number" && typeof override === "string" && /^-?\d+$/.test(override)) {
      return Number(override);
    }
    if (typeof base === "boolean" && (override === "true" || override === "false")) {
      return override === "true";
    }
    if (typeof base === "string" && typeof override === "number") return String(override);
    problems.push(`${path}: must be a ${typeof base}, got ${show(override)}`);
    return base;
  }
  return override;
}

function checkResources(r: ResourceValues, path: string, problems: string[]): void {
  const values: Record<string, number> = {};
  for (const kind of ["requests", "limits"] as const) {
    const group = r[kind] as Record<string, unknown>;
    if (!isObject(group)) {
      problems.push(`${path}.${kind}: must be an object with cpu and/or memory`);
      continue;
    }
    for (const [k, v] of Object.entries(group)) {
      if (k !== "cpu" && k !== "memory") {
        problems.push(`${path}.${kind}.${k}: unknown resource (use cpu or memory)`);
        continue;
      }
      const q = typeof v === "string" || typeof v === "number"
        ? parseQuantity(String(v))
        : undefined;
      if (q === undefined || q < 0) {
        problems.push(
          `${path}.${kind}.${k}: must be a quantity ≥ 0 such as ${
            k === "cpu" ? "100m" : "64Mi"
          }, got ${show(v)}`,
        );
      } else values[`${kind}.${k}`] = q;
    }
  }
  for (const k of ["cpu", "memory"]) {
    const req = values[`requests.${k}`];
    const lim = values[`limits.${k}`];
    if (req !== undefined && lim !== undefined && req > lim) {
      problems.push(`${path}: requests.${k} is larger than limits.${k}`);
    }
  }
}

function checkSettings(
  settings: Record<string, string>,
  specs: OptionSpecs,
  managed: ReadonlySet<string>,
  path: string,
  binary: string,
  problems: string[],
): void {
  for (const name of Object.keys(settings)) {
    if (!(name in specs)) {
      problems.push(
        `${path}.${name}: ${binary} has no such setting (see \`${binary} --help\`)`,
      );
    } else if (managed.has(name)) {
      problems.push(`${path}.${name}: set by the deployment itself; use the dedicated value`);
    }
  }
}

function checkTolerations(list: unknown[], path: string, problems: string[]): void {
  list.forEach((t, i) => {
    const p = `${path}[${i}]`;
    if (!isObject(t)) {
      problems.push(`${p}: must be an object`);
      return;
    }
    for (const k of Object.keys(t)) {
      if (!TOLERATION_KEYS.has(k)) problems.push(`${p}.${k}: unknown toleration field`);
    }
    if (t.operator !== undefined && t.operator !== "Exists" && t.operator !== "Equal") {
      problems.push(`${p}.operator: must be Exists or Equal, got ${show(t.operator)}`);
    }
    if (
      t.effect !== undefined && !["NoSchedule", "PreferNoSchedule", "NoExecute"].includes(
        String(t.effect),
      )
    ) {
      problems.push(`${p}.effect: must be NoSchedule, PreferNoSchedule or NoExecute`);
    }
  });
}

function checkLabels(map: Record<string, string>, path: string, problems: string[]): void {
  for (const [k, v] of Object.entries(map)) {
    if (!LABEL_KEY.test(k)) problems.push(`${path}: "${k}" is not a valid label key`);
    if (!LABEL_VALUE.test(v)) problems.push(`${path}.${k}: "${v}" is not a valid label value`);
  }
}

function port(v: number, path: string, problems: string[], allowZero = false): void {
  if (!Number.isInteger(v) || v < (allowZero ? 0 : 1) || v > 65535) {
    problems.push(
      `${path}: must be a port number 1-65535${allowZero ? " (or 0: off)" : ""}, got ${v}`,
    );
  }
}

function oneOf(v: string, choices: readonly string[], path: string, problems: string[]): void {
  if (!choices.includes(v)) {
    problems.push(`${path}: must be one of ${choices.join(", ")}, got "${v}"`);
  }
}

function name(v: string, re: RegExp, path: string, problems: string[], allowEmpty = false): void {
  if (allowEmpty && v === "") return;
  if (!re.test(v)) {
    problems.push(
      `${path}: must be a ${re === DNS_LABEL ? "DNS label" : "DNS subdomain"} name, got "${v}"`,
    );
  }
}

function semantic(v: DeployValues, problems: string[]): void {
  const versionIssue = versionProblem(v.version);
  if (versionIssue) problems.push(`version: ${versionIssue}`);
  name(v.namespace, DNS_LABEL, "namespace", problems);
  name(v.mountpointPod.namespace, DNS_LABEL, "mountpointPod.namespace", problems);
  checkLabels(v.customLabels, "customLabels", problems);
  checkLabels(v.node.nodeSelector, "node.nodeSelector", problems);
  checkLabels(v.controller.nodeSelector, "controller.nodeSelector", problems);
  v.imagePullSecrets.forEach((s, i) =>
    name(String(s), DNS_SUBDOMAIN, `imagePullSecrets[${i}]`, problems)
  );
  oneOf(v.image.pullPolicy, ["Always", "IfNotPresent", "Never"], "image.pullPolicy", problems);
  const registryProblem = imageProblem(`${v.image.registry}/x:${v.image.tag}`);
  if (registryProblem) problems.push(`image.registry/image.tag: ${registryProblem}`);
  for (
    const k of [
      "node",
      "controller",
      "mounter",
      "nodeDriverRegistrar",
      "livenessProbe",
      "csiProvisioner",
    ] as const
  ) {
    const ref = v.image[k];
    if (ref === "" && ["node", "controller", "mounter"].includes(k)) continue;
    const p = imageProblem(ref);
    if (p) problems.push(`image.${k}: ${p}`);
  }
  if (v.s3.endpointUrl !== "" && !/^https?:\/\/[^\s/]+(\/\S*)?$/.test(v.s3.endpointUrl)) {
    problems.push(`s3.endpointUrl: must be an http(s) URL or empty, got "${v.s3.endpointUrl}"`);
  }
  if (
    !Number.isInteger(v.podIdentity.tokenExpirationSeconds) ||
    v.podIdentity.tokenExpirationSeconds < 600
  ) {
    problems.push(
      `podIdentity.tokenExpirationSeconds: must be an integer of at least 600 (the API server's minimum), got ${v.podIdentity.tokenExpirationSeconds}`,
    );
  }
  oneOf(
    v.csiDriver.fsGroupPolicy,
    ["File", "None", "ReadWriteOnceWithFSType"],
    "csiDriver.fsGroupPolicy",
    problems,
  );
  const levels = ["trace", "debug", "info", "warning", "error", "fatal"];
  oneOf(v.node.logLevel, levels, "node.logLevel", problems);
  oneOf(v.controller.logLevel, levels, "controller.logLevel", problems);
  if (!v.node.kubeletPath.startsWith("/")) {
    problems.push(`node.kubeletPath: must be an absolute path, got "${v.node.kubeletPath}"`);
  }
  port(v.node.metricsPort, "node.metricsPort", problems, true);
  port(v.node.healthPort, "node.healthPort", problems);
  port(v.node.registrarHealthPort, "node.registrarHealthPort", problems);
  port(v.controller.metricsPort, "controller.metricsPort", problems);
  port(v.provisioner.httpPort, "provisioner.httpPort", problems);
  port(v.mountpointPod.metricsPort, "mountpointPod.metricsPort", problems, true);
  if (v.provisioner.enabled && v.provisioner.httpPort === v.controller.metricsPort) {
    problems.push(
      "provisioner.httpPort: must differ from controller.metricsPort (the provisioner pod serves both)",
    );
  }
  for (const k of ["controller", "provisioner"] as const) {
    if (!Number.isInteger(v[k].replicas) || v[k].replicas < 0) {
      problems.push(`${k}.replicas: must be a whole number ≥ 0, got ${v[k].replicas}`);
    }
  }
  if (parseDuration(v.provisioner.timeout) === undefined) {
    problems.push(
      `provisioner.timeout: must be a duration such as 60s, got "${v.provisioner.timeout}"`,
    );
  }
  checkResources(v.node.resources, "node.resources", problems);
  checkResources(v.controller.resources, "controller.resources", problems);
  checkResources(v.provisioner.resources, "provisioner.resources", problems);
  checkResources(v.sidecars.resources, "sidecars.resources", problems);
  checkResources(v.mountpointPod.resources, "mountpointPod.resources", problems);
  checkTolerations(v.node.tolerations, "node.tolerations", problems);
  checkTolerations(v.controller.tolerations, "controller.tolerations", problems);
  for (
    const k of [
      "priorityClassName",
      "preemptingPriorityClassName",
      "headroomPriorityClassName",
    ] as const
  ) {
    name(
      v.mountpointPod[k],
      DNS_SUBDOMAIN,
      `mountpointPod.${k}`,
      problems,
      k !== "priorityClassName",
    );
  }
  if (v.mountpointPod.headroomImage) {
    const problem = imageProblem(v.mountpointPod.headroomImage);
    if (problem) problems.push(`mountpointPod.headroomImage: ${problem}`);
  }
  if (v.mountpointPod.resources.limits.cpu) {
    problems.push(
      "mountpointPod.resources.limits.cpu: the controller sets no CPU limit on Mountpoint Pods",
    );
  }
  if (!Number.isInteger(v.mountpointPod.uid) || v.mountpointPod.uid <= 0) {
    problems.push(`mountpointPod.uid: must be a non-root uid (> 0), got ${v.mountpointPod.uid}`);
  }
  if (!v.mountpointPod.command.startsWith("/")) {
    problems.push(
      `mountpointPod.command: must be an absolute path in the mounter image, got "${v.mountpointPod.command}"`,
    );
  }
  for (const k of ["workSizeLimit", "cacheSizeLimit"] as const) {
    const q = parseQuantity(String(v.mountpointPod[k]));
    if (q === undefined || q < 2 ** 20) {
      problems.push(
        `mountpointPod.${k}: must be a size of at least 1Mi such as 256Mi or 10Gi, got ${
          show(v.mountpointPod[k])
        }`,
      );
    }
  }
  name(v.s3CredentialSecret.name, DNS_SUBDOMAIN, "s3CredentialSecret.name", problems, true);
  for (const k of ["accessKeyId", "secretAccessKey", "sessionToken"] as const) {
    const key = v.s3CredentialSecret[k];
    if ((key || k !== "sessionToken") && !/^[-._a-zA-Z0-9]+$/.test(key)) {
      problems.push(`s3CredentialSecret.${k}: must be a Secret key name, got "${key}"`);
    }
  }
  name(v.tls.caCertConfigMap, DNS_SUBDOMAIN, "tls.caCertConfigMap", problems, true);
  if (v.tls.caCertData && !v.tls.caCertConfigMap) {
    problems.push("tls.caCertData: needs tls.caCertConfigMap (the ConfigMap name to create)");
  }
  if (v.tls.caCertData && !v.tls.caCertData.includes("-----BEGIN CERTIFICATE-----")) {
    problems.push("tls.caCertData: must be PEM (-----BEGIN CERTIFICATE-----)");
  }
  for (const k of ["httpProxy", "httpsProxy"] as const) {
    if (v.proxy[k] && !/^https?:\/\/\S+$/.test(v.proxy[k])) {
      problems.push(`proxy.${k}: must be an http(s) URL or empty, got "${v.proxy[k]}"`);
    }
  }
  checkSettings(
    v.node.settings,
    NODE_OPTIONS,
    MANAGED_NODE_SETTINGS,
    "node.settings",
    "s3-csi-node",
    problems,
  );
  checkSettings(
    v.controller.settings,
    CONTROLLER_OPTIONS,
    MANAGED_CONTROLLER_SETTINGS,
    "controller.settings",
    "s3-csi-controller",
    problems,
  );
}

/**
 * Apply `overrides` in order on top of the defaults and validate.
 * @throws {ValuesError} listing every problem.
 */
export function resolveValues(...overrides: unknown[]): DeployValues {
  const problems: string[] = [];
  let values: unknown = defaultValues();
  for (const o of overrides) values = merge(values, o, "", problems);
  semantic(values as DeployValues, problems);
  if (problems.length) throw new ValuesError(problems);
  return values as DeployValues;
}
