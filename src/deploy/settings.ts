/**
 * Container configuration derived from the binaries' own option specs (`NODE_OPTIONS`,
 * `CONTROLLER_OPTIONS`, `LOG_OPTIONS`): environment variable names come from the specs, never from
 * strings repeated here, and the rendered args + env are parsed with the binaries' own parser
 * ({@link checkContainerConfig}) so a manifest cannot set a flag a binary does not have.
 *
 * @module
 */
import type { CONTROLLER_OPTIONS } from "../options/controller_options.ts";
import type { NODE_OPTIONS } from "../options/node_options.ts";
import { type OptionSpecs, parseConfig } from "../util/config.ts";
import { errorMessage } from "../util/errors.ts";
import type { EnvVar } from "./k8s_objects.ts";

/** Node plugin settings the deployment sets itself (users change them through dedicated values). */
export const MANAGED_NODE_SETTINGS: ReadonlySet<keyof typeof NODE_OPTIONS | string> = new Set([
  "endpoint",
  "node-id",
  "kubelet-path",
  "mountpoint-namespace",
  "mountpoint-image",
  "mountpoint-command",
  "mountpoint-uid",
  "mountpoint-cache-size-limit",
  "metrics-port",
  "s3-endpoint-url",
  "s3-region",
  "pod-identity-audience",
]);

/** Controller settings the deployment sets itself. */
export const MANAGED_CONTROLLER_SETTINGS: ReadonlySet<keyof typeof CONTROLLER_OPTIONS | string> =
  new Set([
    "reconciler",
    "csi-endpoint",
    "mountpoint-namespace",
    "mountpoint-image",
    "mountpoint-image-pull-policy",
    "mountpoint-command",
    "mountpoint-work-size-limit",
    "mountpoint-cache-size-limit",
    "mountpoint-priority-class-name",
    "mountpoint-preempting-priority-class-name",
    "mountpoint-headroom-priority-class-name",
    "mountpoint-headroom-image",
    "mountpoint-uid",
    "mountpoint-cpu-request",
    "mountpoint-memory-request",
    "mountpoint-memory-limit",
    "tls-ca-configmap",
    "leader-elect",
    "leader-election-namespace",
    "metrics-address",
    "s3-endpoint-url",
    "s3-region",
    "s3-ca-bundle",
    "s3-proxy",
  ]);

/** Thrown when a component spec names an option the binary does not declare. */
export class UnknownOptionError extends Error {
  /** Build for `option` of `binary`. */
  constructor(binary: string, option: string, why: string) {
    super(`${binary} option "${option}" ${why}`);
    this.name = "UnknownOptionError";
  }
}

/** The environment variable of option `name` in `specs`. @throws {UnknownOptionError} */
export function envName(specs: OptionSpecs, binary: string, name: string): string {
  const spec = specs[name];
  if (!spec) throw new UnknownOptionError(binary, name, "does not exist");
  if (!spec.env) throw new UnknownOptionError(binary, name, "has no environment variable");
  return spec.env;
}

/** `{name: <env of option>, value}`. @throws {UnknownOptionError} */
export function optionEnv(
  specs: OptionSpecs,
  binary: string,
  name: string,
  value: string | number | boolean,
): EnvVar {
  return { name: envName(specs, binary, name), value: String(value) };
}

/** Like {@link optionEnv}, but nothing when the binary has no such option (yet). */
export function optionEnvIfAny(
  specs: OptionSpecs,
  binary: string,
  name: string,
  value: string | number | boolean,
): EnvVar[] {
  return specs[name]?.env ? [optionEnv(specs, binary, name, value)] : [];
}

/** `{name: <env of option>, valueFrom: fieldRef}` (downward API). @throws {UnknownOptionError} */
export function optionFieldEnv(
  specs: OptionSpecs,
  binary: string,
  name: string,
  fieldPath: string,
): EnvVar {
  return { name: envName(specs, binary, name), valueFrom: { fieldRef: { fieldPath } } };
}

/** User settings as `--flag=value` args, sorted for stable output. */
export function settingArgs(settings: Readonly<Record<string, string>>): string[] {
  return Object.keys(settings).sort().map((k) => `--${k}=${settings[k]}`);
}

/**
 * Parse a container's args and literal env with the binary's own parser. Env from the downward API
 * is replaced by `placeholder`. Returns the error text, or undefined when the binary accepts it.
 */
export function checkContainerConfig(
  specs: OptionSpecs,
  args: readonly string[],
  env: readonly EnvVar[],
  placeholder = "placeholder",
): string | undefined {
  // Downward-API and Secret values are unknown at render time: an empty value is what a missing
  // optional Secret key gives, and the field paths used are never empty.
  const vars = new Map(
    env.map((e) => [e.name, e.value ?? ("secretKeyRef" in (e.valueFrom ?? {}) ? "" : placeholder)]),
  );
  try {
    parseConfig(specs, args, (n) => vars.get(n));
    return undefined;
  } catch (err) {
    return errorMessage(err);
  }
}
