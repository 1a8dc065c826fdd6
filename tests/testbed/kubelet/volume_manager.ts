/**
 * The kubelet volume manager, reduced to the volumes our pods use: emptyDir, PVC-backed CSI
 * volumes of one driver (no NodeStage) and its inline `csi:` volumes. It reproduces kubelet v1.32's order of checks, directories,
 * `vol_data.json` files, RPCs, error classification, retries and `FailedMount` events
 * (`pkg/kubelet/volumemanager/` and the CSI volume plugin `pkg/volume/csi/` of
 * `k8s.io/kubernetes`).
 *
 * Deviation: directories on the way to a volume are made traversable by everyone (`o+x`), because
 * emulated containers reach their volumes by host path instead of through bind mounts.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { PVS } from "../../../src/kube/resources.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import { Backoff, type BackoffSettings, VOLUME_BACKOFF } from "./backoff.ts";
import { CsiNodeCalls, kubeletErrorText } from "./csi_node_calls.ts";
import type { ApiEventRecorder } from "../../../src/kube/event_recorder.ts";
import type { CsiDriver, PersistentVolume, Pod, PodVolume } from "./k8s_types.ts";
import { csiTargetPath, VOL_DATA_FILE } from "./kubelet_paths.ts";
import {
  type CsiMountContext,
  csiMountDevice,
  csiSetUpAt,
  csiUnmountDevice,
  PublishError,
} from "./csi_mounter.ts";
import {
  checkPvNodeAffinity,
  referencedVolumes,
  removeMountDir,
  resolvePvcVolume,
  setUpEmptyDir,
  unsupportedVolume,
  VolumeSetupError,
} from "./pod_volume_sources.ts";
import { buildUnpublishRequest, inlineVolumeSpec } from "./publish_request.ts";
import { pause } from "../../../src/util/sleep.ts";
import { CSI_DRIVERS } from "../../../src/kube/resources.ts";

/** Options of {@link VolumeManager}. */
export interface VolumeManagerOptions {
  readonly client: KubeClient;
  readonly kubeletRoot: string;
  readonly nodeName: string;
  /** The CSI driver this node has registered. */
  readonly driverName: string;
  /** Its node socket. */
  readonly socketPath: string;
  readonly events: ApiEventRecorder;
  /** True once the driver is registered (NodeGetInfo done). */
  readonly isDriverRegistered: () => boolean;
  /** Deadline of one CSI operation. @default 120000 (kubelet's csiTimeout) */
  readonly csiTimeoutMs?: number;
  /** Retry back-off of failed operations. @default 500 ms doubling to 122 s */
  readonly backoff?: BackoffSettings;
  /** Kubelet shutdown: cancels in-flight publish calls (pod deletion alone never does). */
  readonly shutdown?: AbortSignal;
}

interface PodCsiVolume {
  /** PV name, or the pod volume's name for an inline volume. */
  readonly pvName: string;
  readonly inline: boolean;
  readonly volumeHandle: string;
  readonly targetPath: string;
  /** `uncertain`: the publish failed with a non-final error; unpublish at teardown anyway. */
  state: "mounted" | "uncertain";
  /** What to republish with. */
  readonly podVolume: PodVolume;
}

/** Volumes of the pods of one node. */
export class VolumeManager {
  readonly #o: VolumeManagerOptions;
  readonly #log = logger("kubelet", "volumes");
  /** pod UID → PV name → volume. */
  readonly #pods = new Map<string, Map<string, PodCsiVolume>>();
  /** volume handle → device dir made ("globally mounted"). */
  readonly #devices = new Set<string>();

  /** Create the manager. */
  constructor(options: VolumeManagerOptions) {
    this.#o = options;
  }

  get #timeout(): number {
    return this.#o.csiTimeoutMs ?? 120_000;
  }

  /**
   * Set up every referenced volume, retrying failures with back-off and a `FailedMount` event
   * each time, until all are ready (resolves with volume name → host path) or `signal` aborts
   * (rejects with the signal's reason).
   */
  async setUp(pod: Pod, signal: AbortSignal): Promise<Map<string, string>> {
    const paths = new Map<string, string>();
    const referenced = referencedVolumes(pod);
    for (const volume of pod.spec.volumes ?? []) {
      if (!referenced.has(volume.name)) continue;
      const backoff = new Backoff(this.#o.backoff ?? VOLUME_BACKOFF);
      for (;;) {
        signal.throwIfAborted();
        try {
          paths.set(volume.name, await this.#setUpOne(pod, volume));
          break;
        } catch (err) {
          signal.throwIfAborted();
          const message = err instanceof VolumeSetupError ? err.message : errorMessage(err);
          this.#log.warn("Volume {volume} of pod {pod}: {message}", {
            volume: volume.name,
            pod: `${pod.metadata.namespace}/${pod.metadata.name}`,
            message,
          });
          await this.#o.events.record(pod, "Warning", "FailedMount", message, signal);
          await pause(backoff.next(), signal);
        }
      }
    }
    return paths;
  }

  async #setUpOne(pod: Pod, volume: PodVolume): Promise<string> {
    if (volume.emptyDir) return await setUpEmptyDir(this.#o.kubeletRoot, pod, volume.name);
    if (volume.persistentVolumeClaim) return await this.#setUpPvc(pod, volume);
    if (volume.csi) return await this.#setUpInline(pod, volume);
    throw unsupportedVolume(volume);
  }

  /**
   * An inline volume: the driver must be registered and its CSIDriver must list `Ephemeral`; no
   * MountDevice (`CanDeviceMount` is false for inline volumes), then `SetUpAt`.
   */
  async #setUpInline(pod: Pod, volume: PodVolume): Promise<string> {
    const name = volume.csi!.driver;
    if (name !== this.#o.driverName || !this.#o.isDriverRegistered()) {
      throw new VolumeSetupError(
        `MountVolume.NewMounter initialization failed for volume "${volume.name}" : volume mode "Ephemeral" not supported by driver ${name} (driver not found)`,
      );
    }
    const driver = await this.#o.client.get<CsiDriver>(CSI_DRIVERS, name);
    const modes = driver?.spec?.volumeLifecycleModes ?? ["Persistent"];
    if (!driver || !modes.includes("Ephemeral")) {
      throw new VolumeSetupError(
        `MountVolume.SetUp failed for volume "${volume.name}" : volume mode "Ephemeral" not supported by driver ${name} (${
          driver ? `only supports ${JSON.stringify(modes)}` : "no CSIDriver object"
        })`,
      );
    }
    await this.#setUpAt(pod, volume, inlineVolumeSpec(pod, volume), driver);
    return csiTargetPath(this.#o.kubeletRoot, pod.metadata.uid, volume.name);
  }

  async #setUpPvc(pod: Pod, volume: PodVolume): Promise<string> {
    const pv = await resolvePvcVolume(this.#o.client, pod, volume);
    const pvName = pv.metadata.name;
    const csi = pv.spec.csi;
    const setupFailed = (text: string) =>
      new VolumeSetupError(`MountVolume.SetUp failed for volume "${pvName}" : ${text}`);
    if (!csi) throw setupFailed("the kubelet emulator supports only CSI persistent volumes");
    await checkPvNodeAffinity(this.#o.client, this.#o.nodeName, pv);
    const notRegistered = () =>
      new VolumeSetupError(
        `MountVolume.MountDevice failed for volume "${pvName}" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name ${csi.driver} not found in the list of registered CSI drivers`,
      );
    if (csi.driver !== this.#o.driverName || !this.#o.isDriverRegistered()) throw notRegistered();
    const driver = await this.#o.client.get<CsiDriver>(CSI_DRIVERS, csi.driver);
    if (!driver || driver.spec?.attachRequired !== false) {
      throw new VolumeSetupError(
        `Unable to attach or mount volumes: unmounted volumes=[${volume.name}], unattached volumes=[${volume.name}]: timed out waiting for the condition (CSIDriver ${csi.driver} ${
          driver ? "requires attach" : "not found"
        }: the volume is attachable and nothing attaches it)`,
      );
    }
    await this.#setUpAt(pod, volume, pv, driver);
    return csiTargetPath(this.#o.kubeletRoot, pod.metadata.uid, pvName);
  }

  /** MountDevice (first use on the node), then `SetUpAt` with the manager's bookkeeping. */
  async #setUpAt(pod: Pod, volume: PodVolume, pv: PersistentVolume, driver: CsiDriver) {
    const csi = pv.spec.csi!;
    const uid = pod.metadata.uid;
    const pvName = pv.metadata.name;
    const inline = volume.csi !== undefined;
    if (!inline && !this.#devices.has(csi.volumeHandle)) {
      await csiMountDevice(this.#ctx, pvName, csi.driver, csi.volumeHandle);
      this.#devices.add(csi.volumeHandle);
    }
    const known = this.#pods.get(uid)?.get(pvName);
    const record = (state: PodCsiVolume["state"]) =>
      this.#remember(uid, {
        pvName,
        inline,
        volumeHandle: csi.volumeHandle,
        targetPath: csiTargetPath(this.#o.kubeletRoot, uid, pvName),
        state,
        podVolume: volume,
      });
    try {
      await csiSetUpAt(this.#ctx, pod, volume, pv, driver);
    } catch (err) {
      if (err instanceof PublishError) {
        // Final: the volume is certainly not mounted (a mounted one stays mounted on a failed
        // republish). Uncertain: it may be, so it will be unpublished at teardown.
        if (err.final && known?.state === "uncertain") this.#pods.get(uid)?.delete(pvName);
        if (!err.final && !known) record("uncertain");
      }
      throw err;
    }
    if (known) known.state = "mounted";
    else record("mounted");
  }

  get #ctx(): CsiMountContext {
    return {
      client: this.#o.client,
      kubeletRoot: this.#o.kubeletRoot,
      nodeName: this.#o.nodeName,
      socketPath: this.#o.socketPath,
      timeoutMs: this.#timeout,
      ...(this.#o.shutdown ? { shutdown: this.#o.shutdown } : {}),
    };
  }

  #remember(uid: string, v: PodCsiVolume): void {
    let m = this.#pods.get(uid);
    if (!m) this.#pods.set(uid, m = new Map());
    m.set(v.pvName, v);
  }

  /** Republish every mounted volume of a running pod (`requiresRepublish`); failures become events. */
  async republish(pod: Pod, signal: AbortSignal): Promise<void> {
    for (const v of this.#pods.get(pod.metadata.uid)?.values() ?? []) {
      if (signal.aborted) return;
      try {
        const pv = v.inline
          ? inlineVolumeSpec(pod, v.podVolume)
          : await this.#o.client.get<PersistentVolume>(PVS, v.pvName);
        const driver = pv?.spec.csi &&
          await this.#o.client.get<CsiDriver>(CSI_DRIVERS, pv.spec.csi.driver);
        if (!pv || !driver) continue;
        await this.#setUpAt(pod, v.podVolume, pv, driver);
      } catch (err) {
        const message = err instanceof VolumeSetupError ? err.message : errorMessage(err);
        await this.#o.events.record(pod, "Warning", "FailedMount", message, signal);
      }
    }
  }

  /**
   * The volume stats calculator's run for one pod: per mounted CSI volume one NodeGetCapabilities
   * and, only when GET_VOLUME_STATS is advertised, NodeGetVolumeStats. Results are logged.
   */
  async collectStats(podUID: string): Promise<void> {
    for (const v of this.#pods.get(podUID)?.values() ?? []) {
      if (v.state !== "mounted") continue;
      const calls = new CsiNodeCalls(this.#o.socketPath, this.#timeout, this.#o.shutdown);
      try {
        if (!(await calls.supports("GET_VOLUME_STATS"))) continue;
        const res = await calls.stats(v.volumeHandle, v.targetPath);
        this.#log.debug("Volume stats of {pv} (pod {uid}): {usage}", {
          pv: v.pvName,
          uid: podUID,
          usage: res.usage ?? [],
        });
      } catch (err) {
        this.#log.debug("NodeGetVolumeStats for {pv} failed: {error}", {
          pv: v.pvName,
          error: kubeletErrorText(err),
        });
      }
    }
  }

  /** True when the pod has CSI volumes that kubelet would unpublish. */
  hasVolumes(podUID: string): boolean {
    return (this.#pods.get(podUID)?.size ?? 0) > 0;
  }

  /**
   * Unpublish every mounted or uncertain CSI volume of a pod, retrying any error (NotFound
   * included) with back-off until it succeeds or `signal` aborts; then release device dirs no
   * other pod uses. Resolves true when nothing of the pod is left mounted.
   */
  async tearDown(podUID: string, signal: AbortSignal): Promise<boolean> {
    const volumes = this.#pods.get(podUID);
    let clean = true;
    for (const v of [...(volumes?.values() ?? [])]) {
      const backoff = new Backoff(this.#o.backoff ?? VOLUME_BACKOFF);
      for (;;) {
        if (signal.aborted) return false;
        try {
          const parent = v.targetPath.slice(0, v.targetPath.lastIndexOf("/"));
          const data = await Deno.readTextFile(`${parent}/${VOL_DATA_FILE}`).then(
            (t) => JSON.parse(t) as { volumeHandle?: string },
            () => undefined,
          );
          const handle = data?.volumeHandle ?? v.volumeHandle;
          await new CsiNodeCalls(this.#o.socketPath, this.#timeout).unpublish(
            buildUnpublishRequest(handle, v.targetPath),
          );
          if (!(await removeMountDir(v.targetPath))) {
            this.#log.warn("Target {target} is still a mount point after NodeUnpublishVolume", {
              target: v.targetPath,
            });
            clean = false;
          }
          volumes!.delete(v.pvName);
          break;
        } catch (err) {
          this.#log.warn("UnmountVolume.TearDown failed for volume {pv} (pod {uid}): {error}", {
            pv: v.pvName,
            uid: podUID,
            error: kubeletErrorText(err),
          });
          await pause(backoff.next(), signal);
        }
      }
      await this.#releaseDevice(v.volumeHandle);
    }
    if (volumes?.size === 0) this.#pods.delete(podUID);
    return clean;
  }

  /** UnmountDevice once no pod on the node uses the volume. */
  async #releaseDevice(handle: string): Promise<void> {
    for (const m of this.#pods.values()) {
      for (const v of m.values()) if (v.volumeHandle === handle) return;
    }
    if (!this.#devices.has(handle)) return;
    try {
      await csiUnmountDevice(this.#ctx, this.#o.driverName, handle);
    } catch (err) {
      this.#log.warn("UnmountDevice: NodeGetCapabilities failed: {error}", {
        error: kubeletErrorText(err),
      });
    }
    this.#devices.delete(handle);
  }

  /** `podVolumesExist`: any `…/kubernetes.io~csi/<pv>/mount` of the pod still a mount point. */
  async podVolumesMounted(podUID: string): Promise<boolean> {
    const mounts = await readMountInfo();
    const prefix = `${
      this.#o.kubeletRoot.replace(/\/+$/, "")
    }/pods/${podUID}/volumes/kubernetes.io~csi/`;
    return mounts.some((m) => m.mountPoint.startsWith(prefix) && m.mountPoint.endsWith("/mount"));
  }
}
