/**
 * The kubelet volume manager, reduced to the volumes our pods use: emptyDir and PVC-backed CSI
 * volumes of one driver (no NodeStage). It reproduces kubelet v1.32's order of checks, directories,
 * `vol_data.json` files, RPCs, error classification, retries and `FailedMount` events
 * (`kubelet-csi-contract.md` §1, §2 and §8).
 *
 * Deviation: directories on the way to a volume are made traversable by everyone (`o+x`), because
 * emulated containers reach their volumes by host path instead of through bind mounts.
 *
 * @module
 */
import type { KubeClient } from "../kube/client.ts";
import { NODES, PVCS, PVS, SECRETS } from "../kube/resources.ts";
import { isMountPoint, readMountInfo } from "../sys/mountinfo.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { Backoff, type BackoffSettings, sleep, VOLUME_BACKOFF } from "./backoff.ts";
import { CsiNodeCalls, isFinalError, kubeletErrorText } from "./csi_node_calls.ts";
import type { EventRecorder } from "./event_recorder.ts";
import type {
  CsiDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  PodVolume,
} from "./k8s_types.ts";
import {
  csiDeviceDir,
  csiTargetPath,
  csiVolumeDir,
  deviceVolData,
  emptyDirPath,
  podVolData,
  VOL_DATA_FILE,
} from "./kubelet_paths.ts";
import { buildPublishRequest, buildUnpublishRequest, decodeSecretData } from "./publish_request.ts";
import { CSI_DRIVERS } from "./kubelet_resources.ts";
import { nodeSelectorMatches } from "./scheduler.ts";

/** A volume that could not be set up; `message` is the event text. */
export class VolumeSetupError extends Error {
  override name = "VolumeSetupError";
}

/** Options of {@link VolumeManager}. */
export interface VolumeManagerOptions {
  readonly client: KubeClient;
  readonly kubeletRoot: string;
  readonly nodeName: string;
  /** The CSI driver this node has registered. */
  readonly driverName: string;
  /** Its node socket. */
  readonly socketPath: string;
  readonly events: EventRecorder;
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
  readonly pvName: string;
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

  /** Volume names referenced by some container of the pod (others are never mounted). */
  static referencedVolumes(pod: Pod): Set<string> {
    const names = new Set<string>();
    for (const c of pod.spec.containers) for (const m of c.volumeMounts ?? []) names.add(m.name);
    return names;
  }

  /**
   * Set up every referenced volume, retrying failures with back-off and a `FailedMount` event
   * each time, until all are ready (resolves with volume name → host path) or `signal` aborts
   * (rejects with the signal's reason).
   */
  async setUp(pod: Pod, signal: AbortSignal): Promise<Map<string, string>> {
    const paths = new Map<string, string>();
    const referenced = VolumeManager.referencedVolumes(pod);
    for (const volume of pod.spec.volumes ?? []) {
      if (!referenced.has(volume.name)) continue;
      const backoff = new Backoff(this.#o.backoff ?? VOLUME_BACKOFF);
      for (;;) {
        signal.throwIfAborted();
        try {
          paths.set(volume.name, await this.#setUpOne(pod, volume, signal));
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
          await sleep(backoff.next(), signal);
        }
      }
    }
    return paths;
  }

  async #setUpOne(pod: Pod, volume: PodVolume, signal: AbortSignal): Promise<string> {
    if (volume.emptyDir) return await this.#setUpEmptyDir(pod, volume.name);
    if (volume.persistentVolumeClaim) return await this.#setUpPvc(pod, volume, signal);
    const kind = Object.keys(volume).find((k) => k !== "name") ?? "unknown";
    throw new VolumeSetupError(
      `Unable to attach or mount volumes: unmounted volumes=[${volume.name}], unattached volumes=[], failed to process volumes=[${volume.name}]: volume type "${kind}" is not supported by the kubelet emulator`,
    );
  }

  /** emptyDir: 0777, and with fsGroup the group and setgid bits as `SetVolumeOwnership` sets them. */
  async #setUpEmptyDir(pod: Pod, name: string): Promise<string> {
    const root = this.#o.kubeletRoot;
    const path = emptyDirPath(root, pod.metadata.uid, name);
    await Deno.mkdir(path, { recursive: true });
    await Deno.chmod(`${path}/..`, 0o751);
    const fsGroup = pod.spec.securityContext?.fsGroup;
    if (fsGroup !== undefined) {
      await Deno.chown(path, null, fsGroup);
      await Deno.chmod(path, 0o2777);
    } else {
      await Deno.chmod(path, 0o777);
    }
    return path;
  }

  async #populate(pod: Pod, volume: PodVolume): Promise<PersistentVolume> {
    const ns = pod.metadata.namespace;
    const claimName = volume.persistentVolumeClaim!.claimName;
    const fail = (why: string) =>
      new VolumeSetupError(
        `Unable to attach or mount volumes: unmounted volumes=[${volume.name}], unattached volumes=[], failed to process volumes=[${volume.name}]: ${why}`,
      );
    const pvc = await this.#o.client.get<PersistentVolumeClaim>(PVCS, claimName, ns);
    if (!pvc) {
      throw fail(`error processing PVC ${ns}/${claimName}: PVC ${ns}/${claimName} not found`);
    }
    if (
      pvc.metadata.deletionTimestamp &&
      !pvc.metadata.finalizers?.includes("kubernetes.io/pvc-protection")
    ) {
      throw fail(
        `error processing PVC ${ns}/${claimName}: can't start pod because PVC ${ns}/${claimName} is being deleted`,
      );
    }
    if (pvc.status?.phase !== "Bound") {
      throw fail(`error processing PVC ${ns}/${claimName}: PVC is not bound`);
    }
    const pvName = pvc.spec.volumeName;
    if (!pvName) throw fail(`error processing PVC ${ns}/${claimName}: PVC has empty volumeName`);
    const pv = await this.#o.client.get<PersistentVolume>(PVS, pvName);
    if (!pv) throw fail(`error processing PVC ${ns}/${claimName}: PV ${pvName} not found`);
    if (!pv.spec.claimRef || pv.spec.claimRef.uid !== pvc.metadata.uid) {
      throw fail(
        `error processing PVC ${ns}/${claimName}: PV ${pvName} has no claimRef or its claimRef UID does not match the PVC's`,
      );
    }
    return pv;
  }

  async #setUpPvc(pod: Pod, volume: PodVolume, signal: AbortSignal): Promise<string> {
    const pv = await this.#populate(pod, volume);
    const pvName = pv.metadata.name;
    const csi = pv.spec.csi;
    const setupFailed = (text: string) =>
      new VolumeSetupError(`MountVolume.SetUp failed for volume "${pvName}" : ${text}`);
    if (!csi) throw setupFailed("the kubelet emulator supports only CSI persistent volumes");
    const required = pv.spec.nodeAffinity?.required;
    if (required) {
      const node = await this.#o.client.get<Node>(NODES, this.#o.nodeName);
      if (!node || !nodeSelectorMatches(required, node)) {
        throw new VolumeSetupError(
          `MountVolume.NodeAffinity check failed for volume "${pvName}" : no matching NodeSelectorTerms`,
        );
      }
    }
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
    if (!this.#devices.has(csi.volumeHandle)) {
      await this.#mountDevice(pvName, csi.driver, csi.volumeHandle);
    }
    const target = csiTargetPath(this.#o.kubeletRoot, pod.metadata.uid, pvName);
    await this.#setUpAt(pod, volume, pv, driver, signal);
    return target;
  }

  /** MountDevice without NodeStage: metadata dir `globalmount` + `vol_data.json`. */
  async #mountDevice(pvName: string, driver: string, handle: string): Promise<void> {
    const calls = new CsiNodeCalls(this.#o.socketPath, this.#timeout, this.#o.shutdown);
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
    const dir = csiDeviceDir(this.#o.kubeletRoot, driver, handle);
    await Deno.mkdir(`${dir}/globalmount`, { recursive: true, mode: 0o750 });
    await Deno.writeTextFile(`${dir}/${VOL_DATA_FILE}`, deviceVolData(driver, handle));
    this.#devices.add(handle);
  }

  /** `csiMountMgr.SetUpAt` (first publish and every republish). */
  async #setUpAt(
    pod: Pod,
    volume: PodVolume,
    pv: PersistentVolume,
    driver: CsiDriver,
    _signal: AbortSignal,
  ): Promise<void> {
    const csi = pv.spec.csi!;
    const pvName = pv.metadata.name;
    const uid = pod.metadata.uid;
    const root = this.#o.kubeletRoot;
    const calls = new CsiNodeCalls(this.#o.socketPath, this.#timeout, this.#o.shutdown);
    const failed = (text: string) =>
      new VolumeSetupError(`MountVolume.SetUp failed for volume "${pvName}" : ${text}`);
    try {
      await calls.supports("STAGE_UNSTAGE_VOLUME");
    } catch (err) {
      throw failed(kubeletErrorText(err));
    }
    const dir = csiVolumeDir(root, uid, pvName);
    await Deno.mkdir(dir, { recursive: true, mode: 0o750 });
    await this.#makeTraversable(uid, dir);
    let secrets: Record<string, string> | undefined;
    const ref = csi.nodePublishSecretRef;
    if (ref) {
      const ns = ref.namespace ?? pod.metadata.namespace;
      try {
        const secret = await this.#o.client.get<{ data?: Record<string, string> }>(
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
    await Deno.writeTextFile(
      `${dir}/${VOL_DATA_FILE}`,
      podVolData({
        driverName: csi.driver,
        volumeHandle: csi.volumeHandle,
        nodeName: this.#o.nodeName,
        specVolID: pvName,
      }),
    );
    const target = csiTargetPath(root, uid, pvName);
    const known = this.#pods.get(uid)?.get(pvName);
    try {
      const singleNodeMultiWriter = await calls.supports("SINGLE_NODE_MULTI_WRITER");
      const request = buildPublishRequest({
        kubeletRoot: root,
        pod,
        pv,
        readOnly: volume.persistentVolumeClaim?.readOnly ?? false,
        podInfoOnMount: driver.spec?.podInfoOnMount ?? false,
        secrets,
        volumeMountGroup,
        singleNodeMultiWriter,
      });
      await calls.publish(request);
    } catch (err) {
      if (isFinalError(err)) {
        // A failed republish of a mounted volume keeps it mounted (removeMountDir only acts on a
        // target that is no longer a mount point).
        await this.#removeMountDir(target);
        if (known?.state === "uncertain") this.#pods.get(uid)?.delete(pvName);
      } else if (!known) {
        this.#remember(uid, {
          pvName,
          volumeHandle: csi.volumeHandle,
          targetPath: target,
          state: "uncertain",
          podVolume: volume,
        });
      }
      throw failed(kubeletErrorText(err));
    }
    if (known) known.state = "mounted";
    else {
      this.#remember(uid, {
        pvName,
        volumeHandle: csi.volumeHandle,
        targetPath: target,
        state: "mounted",
        podVolume: volume,
      });
    }
  }

  #remember(uid: string, v: PodCsiVolume): void {
    let m = this.#pods.get(uid);
    if (!m) this.#pods.set(uid, m = new Map());
    m.set(v.pvName, v);
  }

  /** o+x on the pod dirs down to `dir` (see the module note). */
  async #makeTraversable(uid: string, dir: string): Promise<void> {
    const base = `${this.#o.kubeletRoot.replace(/\/+$/, "")}/pods/${uid}`;
    let p = dir;
    while (p.length >= base.length) {
      await Deno.chmod(p, 0o751).catch(() => {});
      p = p.slice(0, p.lastIndexOf("/"));
    }
  }

  /**
   * `removeMountDir`: unless the target is still a mount point, rmdir `mount`, remove
   * `vol_data.json` and rmdir the PV dir. Returns false when the target is still mounted.
   */
  async #removeMountDir(target: string): Promise<boolean> {
    if (isMountPoint(await readMountInfo(), target)) return false;
    const parent = target.slice(0, target.lastIndexOf("/"));
    await Deno.remove(target).catch(() => {});
    await Deno.remove(`${parent}/${VOL_DATA_FILE}`).catch(() => {});
    await Deno.remove(parent).catch(() => {});
    return true;
  }

  /** Republish every mounted volume of a running pod (`requiresRepublish`); failures become events. */
  async republish(pod: Pod, signal: AbortSignal): Promise<void> {
    for (const v of this.#pods.get(pod.metadata.uid)?.values() ?? []) {
      if (signal.aborted) return;
      try {
        const pv = await this.#o.client.get<PersistentVolume>(PVS, v.pvName);
        const driver = pv?.spec.csi &&
          await this.#o.client.get<CsiDriver>(CSI_DRIVERS, pv.spec.csi.driver);
        if (!pv || !driver) continue;
        await this.#setUpAt(pod, v.podVolume, pv, driver, signal);
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
          if (!(await this.#removeMountDir(v.targetPath))) {
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
          await sleep(backoff.next(), signal);
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
      await new CsiNodeCalls(this.#o.socketPath, this.#timeout).supports(
        "STAGE_UNSTAGE_VOLUME",
      );
    } catch (err) {
      this.#log.warn("UnmountDevice: NodeGetCapabilities failed: {error}", {
        error: kubeletErrorText(err),
      });
    }
    const dir = csiDeviceDir(this.#o.kubeletRoot, this.#o.driverName, handle);
    await Deno.remove(`${dir}/globalmount`).catch(() => {});
    await Deno.remove(`${dir}/${VOL_DATA_FILE}`).catch(() => {});
    await Deno.remove(dir).catch(() => {});
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
