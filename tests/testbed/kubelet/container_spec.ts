/**
 * How the kubelet emulator turns a Pod's container into a host process.
 *
 * - **Image mapping.** There are no images: a Mountpoint Pod (label
 *   `s3.csi.scality.com/component: mountpoint-pod`) runs this repository's mounter (a configured
 *   argv, e.g. `deno run -A src/cmd/mounter/main.ts`) followed by the container's `args`; any other
 *   container runs its `command` + `args` with the host's binaries.
 * - **Volumes.** Processes share the host's mount namespace, so each `volumeMounts[].mountPath` is
 *   rewritten to the volume's host path (emptyDir dir or CSI target path) wherever it appears as a
 *   path in `command`, `args`, env values and `workingDir`. A Mountpoint Pod also gets
 *   `MOUNTER_COMM_DIR` pointing at the host path of the volume mounted at `/comm`.
 * - **Identity.** `runAsUser`/`runAsGroup` (container over pod), `fsGroup` and
 *   `supplementalGroups` as supplementary groups, `allowPrivilegeEscalation: false` as
 *   no_new_privs, all applied by `setpriv` in a new session (`setsid`) so the whole process group
 *   can be signalled.
 *
 * @module
 */
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../../../src/mppod/labels.ts";
import { COMM_DIR } from "../../../src/mppod/paths.ts";
import type { Container, Pod } from "./k8s_types.ts";

/** Default PATH of container processes. */
export const CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** A container that cannot be started (kubelet's `CreateContainerConfigError`). */
export class ContainerConfigError extends Error {
  override name = "ContainerConfigError";
}

/** What to run for a Mountpoint Pod's container instead of its image. */
export interface ImageMapping {
  /** argv prefix, e.g. `[deno, "run", "-A", "<repo>/src/cmd/mounter/main.ts"]`. */
  readonly argv: readonly string[];
  /** Extra environment (e.g. `DENO_DIR`), keyed by the process uid. */
  readonly env?: (uid: number) => Record<string, string>;
}

/** A fully resolved process. */
export interface ProcessSpec {
  /** argv of the container itself (after mapping and rewriting), for status and logs. */
  readonly containerArgv: string[];
  /** argv actually executed: `setsid setpriv … -- <containerArgv>`. */
  readonly argv: string[];
  readonly env: Record<string, string>;
  readonly cwd: string;
  readonly uid: number;
  readonly gid: number;
  readonly groups: number[];
}

/** Looks up `valueFrom` references: returns undefined when the object or key is missing. */
export type ValueLookup = (
  kind: "Secret" | "ConfigMap",
  namespace: string,
  name: string,
  key: string,
) => Promise<string | undefined>;

/** True when the pod is a Mountpoint Pod. */
export function isMountpointPod(pod: Pod): boolean {
  return pod.metadata.labels?.[LABEL_COMPONENT] === COMPONENT_MOUNTPOINT_POD;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Replace each `mountPath` (longest first) by its host path where it appears as a whole path or
 * path prefix: `/data`, `/data/f`, `x=/data` and `'/data'` match; `/database` and `/x/data` do not.
 */
export function rewritePaths(text: string, mounts: ReadonlyMap<string, string>): string {
  const paths = [...mounts.keys()].filter((p) => p !== "/").sort((a, b) => b.length - a.length);
  if (!paths.length) return text;
  const re = new RegExp(
    `(^|[^A-Za-z0-9._~/-])(${
      paths.map((p) => escapeRegExp(p.replace(/\/+$/, ""))).join("|")
    })(?=$|[^A-Za-z0-9._~-])`,
    "g",
  );
  return text.replace(re, (_m, pre: string, path: string) => `${pre}${mounts.get(path) ?? path}`);
}

/** Kubernetes `$(VAR)` expansion in command and args; `$$(` escapes. */
export function expandVars(text: string, env: Readonly<Record<string, string>>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name?: string) => {
    if (m === "$$") return "$";
    return name !== undefined && name in env ? env[name]! : m;
  });
}

function fieldRefValue(pod: Pod, path: string): string {
  const label = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (label) return (pod.metadata[label[1] as "labels" | "annotations"] ?? {})[label[2]!] ?? "";
  switch (path) {
    case "metadata.name":
      return pod.metadata.name;
    case "metadata.namespace":
      return pod.metadata.namespace;
    case "metadata.uid":
      return pod.metadata.uid;
    case "spec.nodeName":
      return pod.spec.nodeName ?? "";
    case "spec.serviceAccountName":
      return pod.spec.serviceAccountName ?? "";
    case "status.hostIP":
    case "status.podIP":
      return "127.0.0.1";
    default:
      throw new ContainerConfigError(`unsupported fieldRef "${path}"`);
  }
}

/** Resolve the container's environment (values, fieldRefs, secret and configmap keys). */
export async function resolveEnv(
  pod: Pod,
  container: Container,
  lookup: ValueLookup,
): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    const from = e.valueFrom;
    if (!from) {
      env[e.name] = expandVars(e.value ?? "", env);
      continue;
    }
    if (from.fieldRef?.fieldPath) {
      env[e.name] = fieldRefValue(pod, from.fieldRef.fieldPath);
      continue;
    }
    const ref = from.secretKeyRef ?? from.configMapKeyRef;
    const kind = from.secretKeyRef ? "Secret" : "ConfigMap";
    if (!ref?.name || !ref.key) throw new ContainerConfigError(`env "${e.name}": bad valueFrom`);
    const value = await lookup(kind, pod.metadata.namespace, ref.name, ref.key);
    if (value === undefined) {
      if (ref.optional) continue;
      throw new ContainerConfigError(
        `couldn't find key ${ref.key} in ${kind} ${pod.metadata.namespace}/${ref.name}`,
      );
    }
    env[e.name] = value;
  }
  return env;
}

/** Options of {@link buildProcessSpec}. */
export interface BuildProcessOptions {
  readonly pod: Pod;
  readonly container: Container;
  /** Pod volume name → host path. */
  readonly volumePaths: ReadonlyMap<string, string>;
  /** Resolved env of the container ({@link resolveEnv}). */
  readonly env: Record<string, string>;
  /** Mapping used for Mountpoint Pods. */
  readonly mountpointImage: ImageMapping;
  /** Working directory when the container sets none. */
  readonly defaultCwd: string;
}

/** Resolve everything needed to start the container. @throws {ContainerConfigError} */
export function buildProcessSpec(o: BuildProcessOptions): ProcessSpec {
  const { pod, container } = o;
  const mounts = new Map<string, string>();
  for (const m of container.volumeMounts ?? []) {
    const host = o.volumePaths.get(m.name);
    if (!host) throw new ContainerConfigError(`volume "${m.name}" of container is not set up`);
    mounts.set(m.mountPath.replace(/\/+$/, "") || "/", host);
  }
  const sc = { ...(pod.spec.securityContext ?? {}), ...(container.securityContext ?? {}) };
  const uid = sc.runAsUser ?? 0;
  const gid = sc.runAsGroup ?? 0;
  if (sc.runAsNonRoot && uid === 0) {
    throw new ContainerConfigError(
      "container has runAsNonRoot and image will run as root (set runAsUser: the emulator has no image user)",
    );
  }
  const groups = [
    ...new Set([
      ...(pod.spec.securityContext?.fsGroup !== undefined
        ? [pod.spec.securityContext.fsGroup]
        : []),
      ...(pod.spec.securityContext?.supplementalGroups ?? []),
    ]),
  ];
  const env: Record<string, string> = {
    PATH: CONTAINER_PATH,
    HOSTNAME: pod.metadata.name,
    HOME: "/",
  };
  for (const [k, v] of Object.entries(o.env)) env[k] = rewritePaths(v, mounts);
  const expand = (s: string) => rewritePaths(expandVars(s, env), mounts);
  let containerArgv: string[];
  if (isMountpointPod(pod)) {
    containerArgv = [...o.mountpointImage.argv, ...(container.args ?? []).map(expand)];
    Object.assign(env, o.mountpointImage.env?.(uid) ?? {});
    const comm = mounts.get(COMM_DIR);
    if (comm && !("MOUNTER_COMM_DIR" in env)) env.MOUNTER_COMM_DIR = comm;
  } else {
    containerArgv = [...(container.command ?? []), ...(container.args ?? [])].map(expand);
    if (!container.command?.length) {
      throw new ContainerConfigError(
        `container "${container.name}" has no command: the kubelet emulator runs host binaries and cannot use the image's entrypoint (${
          container.image ?? "no image"
        })`,
      );
    }
  }
  const priv = ["--reuid", String(uid), "--regid", String(gid)];
  priv.push(...(groups.length ? ["--groups", groups.join(",")] : ["--clear-groups"]));
  if (sc.allowPrivilegeEscalation === false) priv.push("--no-new-privs");
  const cwd = container.workingDir ? rewritePaths(container.workingDir, mounts) : o.defaultCwd;
  return {
    containerArgv,
    argv: ["setsid", "setpriv", ...priv, "--", ...containerArgv],
    env,
    cwd,
    uid,
    gid,
    groups,
  };
}
