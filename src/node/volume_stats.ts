/**
 * NodeGetVolumeStats: is a published volume healthy? The target must be mounted; an async stat of
 * it must answer (a dead engine gives `ENOTCONN` at once); its Mountpoint Pod must be Running and
 * must not have reported an error. Any failure is reported as `VolumeCondition{abnormal: true}`
 * with a message saying what to do. S3 has no capacity, so no usage is reported.
 *
 * @module
 */
import type { NodeGetVolumeStatsResponse } from "../csi/gen/csi_types.ts";
import { notFound } from "../csi/errors.ts";
import { hostCommDir, MOUNT_ERROR, sourceMountRoot } from "../mppod/paths.ts";
import type { Files } from "../sys/files.ts";
import { findMount, type MountInfo } from "../sys/mountinfo.ts";
import type { Sys } from "../sys/sys.ts";
import { checkMountHealth } from "./health.ts";
import { describePodState, type MountpointPods } from "./mountpoint_pods.ts";

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

/** Compute the stats answer for a published path. @throws {CsiError} NotFound when not mounted */
export async function volumeStats(
  deps: { sys: Sys; files: Files; pods: MountpointPods; kubeletRoot: string; healthMs: number },
  volumePath: string,
): Promise<NodeGetVolumeStatsResponse> {
  const mounts = await deps.sys.readMountInfo();
  const target = findMount(mounts, volumePath);
  if (!target) throw notFound(`Volume path "${volumePath}" is not mounted`);
  const abnormal = (message: string): NodeGetVolumeStatsResponse => ({
    usage: [],
    volumeCondition: { abnormal: true, message },
  });
  const health = await checkMountHealth(deps.files, volumePath, deps.healthMs);
  if (!health.ok) {
    return abnormal(
      `The volume's FUSE mount does not answer (${health.problem}): its Mountpoint Pod's engine stopped. The volume is repaired on the next NodePublishVolume; restart the workload pod to get a working mount`,
    );
  }
  const source = sourceOf(mounts, target, deps.kubeletRoot);
  if (source) {
    const pod = deps.pods.pod(source.mpName);
    const ns = deps.pods.namespace;
    if (!pod) {
      return abnormal(`Mountpoint Pod ${ns}/${source.mpName} of this volume no longer exists`);
    }
    if (pod.status?.phase !== "Running") {
      return abnormal(
        `Mountpoint Pod ${ns}/${source.mpName} is not running (${describePodState(pod)})`,
      );
    }
    const uid = pod.metadata?.uid;
    if (uid) {
      const error = await deps.files.readTextFile(
        `${hostCommDir(deps.kubeletRoot, uid)}/${MOUNT_ERROR}`,
      ).catch(() => undefined);
      if (error) {
        return abnormal(
          `Mountpoint Pod ${ns}/${source.mpName} reported: ${error.trim().slice(-500)}`,
        );
      }
    }
  }
  return { usage: [], volumeCondition: { abnormal: false, message: "Volume is healthy" } };
}
