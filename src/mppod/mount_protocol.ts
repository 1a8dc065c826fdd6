/**
 * Versions of the mount message (`mount_message.ts`) and how the node plugin and a Mountpoint Pod
 * agree on one.
 *
 * 1: the upstream-compatible message (`bucketName`, `args`, `env`, `volumeId`, `engine`), which
 * carries no `protocolVersion`. 2: adds `protocolVersion` and `session`: the engine's session
 * outlives its process (the node plugin keeps the FUSE fd and sends it again, with `resume`, to a
 * restarted Mountpoint container; the mounter's supervisor restarts a dead engine on it).
 *
 * Skew policy (README "Upgrades and version skew"): a mounter accepts every version from
 * {@link MIN_PROTOCOL} to {@link PROTOCOL}; the controller that makes a Mountpoint Pod writes the
 * range its image speaks in {@link ANNOTATION_MOUNT_PROTOCOLS}; the node plugin sends the highest
 * version both sides know (a pod without the annotation speaks 1), and refuses — with an error that
 * names both ranges — a pod with which it shares none.
 *
 * Writers: controller (annotation), node plugin (message). Readers: node plugin, mounter.
 *
 * @module
 */
import { DRIVER_NAME } from "../util/version.ts";

/** The newest version this build speaks. */
export const PROTOCOL = 2;
/** The oldest version this build still speaks. */
export const MIN_PROTOCOL = 1;

/** Annotation on Mountpoint Pods: the mount protocols of its image, `"<min>-<max>"`. */
export const ANNOTATION_MOUNT_PROTOCOLS = `${DRIVER_NAME}/mount-protocols`;

/** A range of protocol versions. */
export interface ProtocolRange {
  readonly min: number;
  readonly max: number;
}

/** This build's range. */
export const OUR_PROTOCOLS: ProtocolRange = { min: MIN_PROTOCOL, max: PROTOCOL };

/** The annotation value for `range`. */
export function formatProtocols(range: ProtocolRange): string {
  return `${range.min}-${range.max}`;
}

/**
 * The range a Mountpoint Pod's annotations announce: none means 1 (pods made before protocol 2);
 * a malformed value is treated as none.
 */
export function podProtocols(
  annotations: Readonly<Record<string, string>> | undefined,
): ProtocolRange {
  const m = /^(\d{1,4})-(\d{1,4})$/.exec(annotations?.[ANNOTATION_MOUNT_PROTOCOLS] ?? "");
  const min = Number(m?.[1]);
  const max = Number(m?.[2]);
  return m && min >= 1 && min <= max ? { min, max } : { min: 1, max: 1 };
}

/** Why no version can be agreed. */
export class ProtocolSkewError extends Error {
  override name = "ProtocolSkewError";
}

/**
 * The highest version in both ranges.
 * @throws {ProtocolSkewError} naming both ranges when they do not overlap
 */
export function negotiate(pod: ProtocolRange, ours: ProtocolRange = OUR_PROTOCOLS): number {
  const v = Math.min(pod.max, ours.max);
  if (v < Math.max(pod.min, ours.min)) {
    throw new ProtocolSkewError(
      `the Mountpoint Pod speaks mount protocols ${formatProtocols(pod)} and this node plugin ${
        formatProtocols(ours)
      }: run a node plugin and a Mountpoint image at most one release apart (README: "Upgrades and version skew")`,
    );
  }
  return v;
}
