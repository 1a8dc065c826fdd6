/**
 * NodeGetVolumeStats: is a published volume healthy? The target must be mounted; its FUSE
 * connection must answer (a dead engine gives `ENOTCONN` at once, a hung one times out: see
 * `health.ts`, which keeps at most one probe per connection in flight); its Mountpoint Pod must be
 * Running and must not have reported an error. Any failure is reported as
 * `VolumeCondition{abnormal: true}` with a message saying what to do. S3 has no capacity: the
 * usage is one `BYTES` entry without figures ({@link UNKNOWN_USAGE}), because kubelet rejects an
 * answer whose usage list is empty ("failed to get usage from response. usage is nil") before it
 * looks at the volume condition.
 *
 * @module
 */
import type { NodeGetVolumeStatsResponse, VolumeUsage } from "../csi/gen/csi_types.ts";
import { notFound } from "../csi/errors.ts";
import { sourceMountRoot } from "../mppod/paths.ts";
import type { Files } from "../sys/files.ts";
import { DEFAULT_FS_NAME } from "../sys/mount.ts";
import { findMount, type MountInfo } from "../sys/mountinfo.ts";
import type { Sys } from "../sys/sys.ts";
import { openCommDir, readMountError, shortMessage } from "./comm_dir.ts";
import { readAccessKeyId } from "./credentials.ts";
import type { HealthChecker } from "./health.ts";
import { describePodState, type MountpointPods } from "./mountpoint_pods.ts";

/** Usage of an S3 volume: unit bytes, no figures (all three are optional in the CSI spec). */
export const UNKNOWN_USAGE: readonly VolumeUsage[] = Object.freeze([{ unit: "BYTES" as const }]);

/** The source mount (and so the Mountpoint Pod name) behind a target mount. */
export function sourceOf(
  mounts: readonly MountInfo[],
  target: MountInfo,
  kubeletRoot: string,
): { mount: MountInfo; mpName: string } | undefined {
  const root = `${sourceMountRoot(kubeletRoot)}/`;
  const m = mounts.find((x) =>
    x.majorMinor === target.majorMinor && x.mountPoint.startsWith(root) &&
    !x.mountPoint.slice(root.length).includes("/")
  );
  return m ? { mount: m, mpName: m.mountPoint.slice(root.length) } : undefined;
}

/** What {@link volumeStats} needs. */
export interface VolumeStatsDeps {
  readonly sys: Sys;
  readonly files: Files;
  readonly pods: MountpointPods;
  readonly health: HealthChecker;
  readonly kubeletRoot: string;
}

/**
 * Compute the stats answer for a published path.
 * @throws {CsiError} NotFound when nothing of ours is mounted there
 */
export async function volumeStats(
  deps: VolumeStatsDeps,
  volumePath: string,
  signal?: AbortSignal,
): Promise<NodeGetVolumeStatsResponse> {
  const mounts = await deps.sys.readMountInfo();
  const target = findMount(mounts, volumePath);
  if (!target) throw notFound(`Volume path "${volumePath}" is not mounted on this node`);
  const abnormal = (message: string): NodeGetVolumeStatsResponse => ({
    usage: [...UNKNOWN_USAGE],
    volumeCondition: { abnormal: true, message },
  });
  const source = sourceOf(mounts, target, deps.kubeletRoot);
  if (!source) {
    if (target.source !== DEFAULT_FS_NAME || !target.fsType.startsWith("fuse")) {
      throw notFound(`Volume path "${volumePath}" is not a volume of this driver`);
    }
    return abnormal(
      `The volume's source mount is gone (its Mountpoint Pod was removed): the volume is repaired on the next NodePublishVolume; restart the workload pod to get a working mount`,
    );
  }
  const health = await deps.health.check(volumePath, source.mount.mountPoint, signal);
  if (health.state === "hung" || health.state === "dead") {
    return abnormal(
      `The volume's FUSE mount does not answer (${health.problem}): its Mountpoint Pod's engine stopped or is being restarted. A restarted engine resumes the session; otherwise the volume is repaired on the next NodePublishVolume and the workload pod must be restarted to get a working mount`,
    );
  }
  const pod = deps.pods.pod(source.mpName);
  const ns = deps.pods.namespace;
  if (!pod) {
    // Without the API cache (API down since the start) nothing more can be said.
    if (!deps.pods.synced) {
      return {
        usage: [...UNKNOWN_USAGE],
        volumeCondition: { abnormal: false, message: "Volume is healthy" },
      };
    }
    return abnormal(`Mountpoint Pod ${ns}/${source.mpName} of this volume no longer exists`);
  }
  if (pod.status?.phase !== "Running") {
    return abnormal(
      `Mountpoint Pod ${ns}/${source.mpName} is not running (${describePodState(pod)})`,
    );
  }
  const uid = pod.metadata?.uid;
  if (uid) {
    using comm = await openCommDir(deps.files, deps.kubeletRoot, uid).catch(() => undefined);
    const error = comm ? await readMountError(comm).catch(() => undefined) : undefined;
    if (error) {
      // The message becomes an Event and `kubectl describe` text: not the volume's access key id.
      const keyId = await readAccessKeyId(comm!).catch(() => undefined);
      return abnormal(
        `Mountpoint Pod ${ns}/${source.mpName} reported: ${
          shortMessage(error, keyId ? [keyId] : [])
        }`,
      );
    }
  }
  return {
    usage: [...UNKNOWN_USAGE],
    volumeCondition: { abnormal: false, message: "Volume is healthy" },
  };
}
