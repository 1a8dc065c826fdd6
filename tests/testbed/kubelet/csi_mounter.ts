/**
 * kubelet's CSI volume plugin for one volume (`csi_attacher.go` + `csi_mounter.go`, v1.32):
 * MountDevice and UnmountDevice without NodeStage (only the `globalmount` metadata dir and its
 * `vol_data.json`), and `SetUpAt` — capability checks, the PV dir (not `mount`), the nodePublish
 * secret, `vol_data.json`, then NodePublishVolume — with kubelet's error texts and final vs
 * uncertain classification. The volume manager keeps the state and retries.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { SECRETS } from "../../../src/kube/resources.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { CsiNodeCalls, isFinalError, kubeletErrorText } from "./csi_node_calls.ts";
import type { CsiDriver, PersistentVolume, Pod, PodVolume } from "./k8s_types.ts";
import {
  csiDeviceDir,
  csiTargetPath,
  csiVolumeDir,
  deviceVolData,
  podVolData,
  VOL_DATA_FILE,
} from "./kubelet_paths.ts";
import { removeMountDir, VolumeSetupError } from "./pod_volume_sources.ts";
import { buildPublishRequest, decodeSecretData } from "./publish_request.ts";

/** What the CSI operations need from the kubelet. */
export interface CsiMountContext {
  readonly client: KubeClient;
  readonly kubeletRoot: string;
  readonly nodeName: string;
  readonly socketPath: string;
  /** Deadline of one operation (kubelet: 2 min). */
  readonly timeoutMs: number;
  /** Cancels in-flight calls (kubelet shutdown). */
  readonly shutdown?: AbortSignal;
}

/** NodePublishVolume failed; `final` false means the volume may be mounted (uncertain). */
export class PublishError extends VolumeSetupError {
  override name = "PublishError";
  /** Create the error with kubelet's event text. */
  constructor(message: string, readonly final: boolean) {
    super(message);
  }
}

/** MountDevice without NodeStage: metadata dir `globalmount` + `vol_data.json`. */
export async function csiMountDevice(
  ctx: CsiMountContext,
  pvName: string,
  driver: string,
  handle: string,
): Promise<void> {
  const calls = new CsiNodeCalls(ctx.socketPath, ctx.timeoutMs, ctx.shutdown);
  let staging: boolean;
  try {
    staging = await calls.supports("STAGE_UNSTAGE_VOLUME");
  } catch (err) {
    throw new VolumeSetupError(
      `MountVolume.MountDevice failed for volume "${pvName}" : ${kubeletErrorText(err)}`,
    );
  }
  if (staging) {
    throw new VolumeSetupError(
      `MountVolume.MountDevice failed for volume "${pvName}" : the kubelet emulator does not implement NodeStageVolume`,
    );
  }
  const dir = csiDeviceDir(ctx.kubeletRoot, driver, handle);
  await Deno.mkdir(`${dir}/globalmount`, { recursive: true, mode: 0o750 });
  await Deno.writeTextFile(`${dir}/${VOL_DATA_FILE}`, deviceVolData(driver, handle));
}

/** UnmountDevice: one NodeGetCapabilities, then the device dir goes (even if the call failed). */
export async function csiUnmountDevice(
  ctx: CsiMountContext,
  driver: string,
  handle: string,
): Promise<void> {
  const dir = csiDeviceDir(ctx.kubeletRoot, driver, handle);
  try {
    await new CsiNodeCalls(ctx.socketPath, ctx.timeoutMs).supports("STAGE_UNSTAGE_VOLUME");
  } finally {
    await Deno.remove(`${dir}/globalmount`).catch(() => {});
    await Deno.remove(`${dir}/${VOL_DATA_FILE}`).catch(() => {});
    await Deno.remove(dir).catch(() => {});
  }
}

/** o+x on the pod dirs down to `dir` (processes reach volumes by host path, not bind mounts). */
async function makeTraversable(root: string, uid: string, dir: string): Promise<void> {
  const base = `${root.replace(/\/+$/, "")}/pods/${uid}`;
  let p = dir;
  while (p.length >= base.length) {
    await Deno.chmod(p, 0o751).catch(() => {});
    p = p.slice(0, p.lastIndexOf("/"));
  }
}

/**
 * `csiMountMgr.SetUpAt` (first publish and every republish).
 * @throws {VolumeSetupError} before the publish; {@link PublishError} when it fails
 */
export async function csiSetUpAt(
  ctx: CsiMountContext,
  pod: Pod,
  volume: PodVolume,
  pv: PersistentVolume,
  driver: CsiDriver,
): Promise<void> {
  const csi = pv.spec.csi!;
  const pvName = pv.metadata.name;
  const uid = pod.metadata.uid;
  const root = ctx.kubeletRoot;
  const calls = new CsiNodeCalls(ctx.socketPath, ctx.timeoutMs, ctx.shutdown);
  const failed = (text: string) =>
    new VolumeSetupError(`MountVolume.SetUp failed for volume "${pvName}" : ${text}`);
  try {
    await calls.supports("STAGE_UNSTAGE_VOLUME");
  } catch (err) {
    throw failed(kubeletErrorText(err));
  }
  const dir = csiVolumeDir(root, uid, pvName);
  await Deno.mkdir(dir, { recursive: true, mode: 0o750 });
  await makeTraversable(root, uid, dir);
  let secrets: Record<string, string> | undefined;
  const ref = csi.nodePublishSecretRef;
  if (ref) {
    const ns = ref.namespace ?? pod.metadata.namespace;
    try {
      const secret = await ctx.client.get<{ data?: Record<string, string> }>(
        SECRETS,
        ref.name,
        ns,
      );
      if (!secret) throw new Error(`secrets "${ref.name}" not found`);
      secrets = decodeSecretData(secret.data);
    } catch (err) {
      throw failed(
        `fetching NodePublishSecretRef ${ns}/${ref.name} failed: ${errorMessage(err)}`,
      );
    }
  }
  let volumeMountGroup: boolean;
  try {
    volumeMountGroup = await calls.supports("VOLUME_MOUNT_GROUP");
  } catch (err) {
    throw failed(kubeletErrorText(err));
  }
  const ephemeral = volume.csi !== undefined;
  await Deno.writeTextFile(
    `${dir}/${VOL_DATA_FILE}`,
    podVolData({
      driverName: csi.driver,
      volumeHandle: csi.volumeHandle,
      nodeName: ctx.nodeName,
      specVolID: pvName,
      volumeLifecycleMode: ephemeral ? "Ephemeral" : "Persistent",
    }),
  );
  const target = csiTargetPath(root, uid, pvName);
  try {
    const singleNodeMultiWriter = await calls.supports("SINGLE_NODE_MULTI_WRITER");
    const request = buildPublishRequest({
      kubeletRoot: root,
      pod,
      pv,
      readOnly: (ephemeral ? volume.csi?.readOnly : volume.persistentVolumeClaim?.readOnly) ??
        false,
      ephemeral,
      podInfoOnMount: driver.spec?.podInfoOnMount ?? false,
      secrets,
      volumeMountGroup,
      singleNodeMultiWriter,
    });
    await calls.publish(request);
  } catch (err) {
    const final = isFinalError(err);
    // Final: kubelet removes the dirs it made, unless the target is (still) a mount point, as
    // after a failed republish of a mounted volume. Uncertain: everything stays.
    if (final) await removeMountDir(target);
    throw new PublishError(failed(kubeletErrorText(err)).message, final);
  }
}
