/**
 * Is this the Mountpoint Pod the controller made? Mountpoint Pod names are deterministic, so
 * whoever can create pods in the Mountpoint namespace could make one under the expected name and
 * receive the FUSE connection and the volume's keys. The admission policy rendered with the
 * manifests lets only the controller create pods there; this is the node plugin's own check, made
 * before it writes credentials into a pod's comm dir: the pod must have what the controller
 * renders (`mppod/pod_spec.ts`, {@link MountpointPodInvariants}) —
 *
 * - exactly one container (no init or ephemeral containers), named as rendered, with the
 *   configured image and command, no args and no `envFrom`;
 * - only the mounter's environment variables, the path-valued ones with the rendered value;
 * - the configured uid and gid (container or pod level), not privileged, no host namespaces;
 * - no volumes beyond comm, work, cache and the custom CA, each of its expected source, mounted
 *   where rendered (no sub-paths);
 * - the controller-owned labels.
 *
 * Pure: the pod comes from the node plugin's watch.
 *
 * @module
 */
import { failedPrecondition } from "../csi/errors.ts";
import type { MountpointPodInvariants } from "../mppod/pod_spec.ts";
import type { MountpointPod } from "./mountpoint_pods.ts";

type Loose = Record<string, unknown>;

function obj(v: unknown): Loose {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v as Loose : {};
}

function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function show(v: unknown): string {
  return JSON.stringify(v) ?? "none";
}

/**
 * How `pod` differs from what the controller renders (empty: it is one of ours). Each entry names
 * the field, what it is and what it must be.
 */
export function podInvariantProblems(pod: MountpointPod, inv: MountpointPodInvariants): string[] {
  const problems: string[] = [];
  const spec = obj(pod.spec);
  const labels = obj(pod.metadata?.labels);
  for (const [k, v] of Object.entries(inv.labels)) {
    if (labels[k] !== v) problems.push(`label ${k} is ${show(labels[k])}, not "${v}"`);
  }
  for (const k of inv.labelKeys) {
    if (typeof labels[k] !== "string" || labels[k] === "") problems.push(`label ${k} is missing`);
  }
  const containers = list(spec.containers);
  if (containers.length !== 1) {
    problems.push(`it has ${containers.length} containers, not 1`);
  }
  for (const k of ["initContainers", "ephemeralContainers"]) {
    if (list(spec[k]).length > 0) problems.push(`it has ${k}`);
  }
  for (const k of ["hostNetwork", "hostPID", "hostIPC"]) {
    if (spec[k] === true) problems.push(`${k} is true`);
  }
  const podSecurity = obj(spec.securityContext);
  const c = obj(containers[0]);
  if (containers.length >= 1) {
    if (c.name !== inv.container) {
      problems.push(`container ${show(c.name)} is not named "${inv.container}"`);
    }
    if (c.image !== inv.image) problems.push(`image is ${show(c.image)}, not "${inv.image}"`);
    if (show(c.command) !== show(inv.command)) {
      problems.push(`command is ${show(c.command)}, not ${show(inv.command)}`);
    }
    if (list(c.args).length > 0) problems.push(`it has args ${show(c.args)}`);
    if (list(c.envFrom).length > 0) problems.push("it has envFrom");
    for (const e of list(c.env).map(obj)) {
      const name = String(e.name);
      if (!Object.hasOwn(inv.env, name)) {
        problems.push(`environment variable ${name} is not the mounter's`);
        continue;
      }
      const want = inv.env[name];
      if (e.valueFrom !== undefined || (want !== undefined && e.value !== want)) {
        problems.push(`environment variable ${name} is ${show(e.value ?? e.valueFrom)}`);
      }
    }
    const security = obj(c.securityContext);
    const uid = security.runAsUser ?? podSecurity.runAsUser;
    const gid = security.runAsGroup ?? podSecurity.runAsGroup;
    if (uid !== inv.uid) problems.push(`it runs as user ${show(uid)}, not ${inv.uid}`);
    if (gid !== inv.uid) problems.push(`it runs as group ${show(gid)}, not ${inv.uid}`);
    if (security.privileged === true) problems.push("the container is privileged");
  }
  const volumes = new Map(list(spec.volumes).map(obj).map((v) => [String(v.name), v]));
  for (const [name, v] of volumes) {
    const allowed = inv.volumes[name];
    if (!allowed) {
      problems.push(`volume ${name} is not one of ${Object.keys(inv.volumes).join(", ")}`);
      continue;
    }
    const sources = Object.keys(v).filter((k) => k !== "name");
    if (sources.length !== 1 || !allowed.sources.includes(sources[0]!)) {
      problems.push(
        `volume ${name} is ${sources.join("+") || "empty"}, not ${allowed.sources.join(" or ")}`,
      );
    }
  }
  for (const [name, allowed] of Object.entries(inv.volumes)) {
    if (allowed.required && !volumes.has(name)) problems.push(`volume ${name} is missing`);
  }
  for (const m of list(c.volumeMounts).map(obj)) {
    const name = String(m.name);
    const allowed = inv.volumes[name];
    if (!allowed || !volumes.has(name)) continue; // reported with the volumes (or the API refuses it)
    if (m.mountPath !== allowed.mountPath || (m.subPath ?? "") !== "" || m.subPathExpr) {
      problems.push(
        `volume ${name} is mounted at ${show(m.mountPath)}${
          m.subPath || m.subPathExpr ? " with a sub-path" : ""
        }, not "${allowed.mountPath}"`,
      );
    }
    if (allowed.readOnly && m.readOnly !== true) problems.push(`volume ${name} is not read-only`);
  }
  return problems;
}

/**
 * Refuse a pod that is not what the controller renders, before anything is handed to it.
 * @throws {CsiError} FailedPrecondition naming what differs
 */
export function checkMountpointPod(
  pod: MountpointPod,
  inv: MountpointPodInvariants,
  who: string,
): void {
  const problems = podInvariantProblems(pod, inv);
  if (problems.length === 0) return;
  const shown = problems.slice(0, 4).join("; ") +
    (problems.length > 4 ? `; and ${problems.length - 4} more` : "");
  throw failedPrecondition(
    `Mountpoint Pod ${who} is not the pod the controller renders (${shown}): it gets no credentials and no FUSE connection. If someone else created it, delete it (the controller makes the right one); if the controller's Mountpoint settings changed, give the node plugin the same (--mountpoint-image, --mountpoint-command, --mountpoint-uid)`,
  );
}
