/**
 * What of a Mountpoint Pod must stay as it was while the node plugin holds its FUSE connection.
 * The custody hands the connection to every restarted Mountpoint container of the same pod; a
 * pod's spec is immutable but for a few fields, and among those its containers' images and its
 * ephemeral containers would put other code next to the connection. The fingerprint is taken when
 * the connection is first handed over (the pod then passed the node plugin's checks) and compared
 * before every hand-over again. Release-independent: a pod made by an earlier release keeps its
 * connection across a node plugin upgrade.
 *
 * Pure.
 *
 * @module
 */
import type { MountpointPod } from "./mountpoint_pods.ts";

/** Named parts of a pod, each as canonical JSON. */
export type PodFingerprint = Readonly<Record<string, string>>;

type Loose = Record<string, unknown>;

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const o = v as Loose;
    return `{${
      Object.keys(o).sort().filter((k) => o[k] !== undefined).map((k) =>
        `${JSON.stringify(k)}:${canonical(o[k])}`
      ).join(",")
    }}`;
  }
  return JSON.stringify(v ?? null);
}

/** Fields of a container that decide what runs in it (not its resources: they can be resized). */
const CONTAINER_FIELDS = [
  "name",
  "image",
  "command",
  "args",
  "env",
  "envFrom",
  "volumeMounts",
  "volumeDevices",
  "securityContext",
  "workingDir",
] as const;

/** The fingerprint of `pod`. */
export function podFingerprint(pod: MountpointPod): PodFingerprint {
  const spec = (pod.spec ?? {}) as Loose;
  const containers = (v: unknown) =>
    (Array.isArray(v) ? v : []).map((c) =>
      Object.fromEntries(CONTAINER_FIELDS.map((k) => [k, (c as Loose)?.[k]]))
    );
  const parts: Record<string, unknown> = {
    uid: pod.metadata?.uid,
    containers: containers(spec.containers),
    initContainers: containers(spec.initContainers),
    ephemeralContainers: spec.ephemeralContainers ?? [],
    volumes: spec.volumes,
    securityContext: spec.securityContext,
    hostNetwork: spec.hostNetwork,
    hostPID: spec.hostPID,
    hostIPC: spec.hostIPC,
    shareProcessNamespace: spec.shareProcessNamespace,
    serviceAccountName: spec.serviceAccountName,
  };
  return Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, canonical(v)]));
}

/** The parts that differ between `then` and `now`, each with both values (bounded); empty: same. */
export function fingerprintChanges(then: PodFingerprint, now: PodFingerprint): string[] {
  const keys = [...new Set([...Object.keys(then), ...Object.keys(now)])].sort();
  const cut = (s: string | undefined) =>
    s === undefined ? "none" : s.length > 200 ? `${s.slice(0, 200)}…` : s;
  return keys.filter((k) => then[k] !== now[k]).map((k) =>
    `${k} was ${cut(then[k])}, is ${cut(now[k])}`
  );
}

/** Parse a fingerprint read back from a record; undefined when it is not one. */
export function parseFingerprint(v: unknown): PodFingerprint | undefined {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return undefined;
  const entries = Object.entries(v as Loose);
  if (!entries.every(([, s]) => typeof s === "string")) return undefined;
  return Object.fromEntries(entries) as PodFingerprint;
}
