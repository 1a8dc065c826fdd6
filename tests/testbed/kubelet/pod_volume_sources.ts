/**
 * The volume sources of a pod as kubelet resolves them before any CSI call: which volumes are
 * referenced, emptyDir directories, and the desired-state populator's PVC → PV checks
 * (`pkg/kubelet/volumemanager/populator/desired_state_of_world_populator.go` of
 * `k8s.io/kubernetes`), plus `removeMountDir`. The texts of the errors are the event messages
 * kubelet emits.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { NODES, PVCS, PVS } from "../../../src/kube/resources.ts";
import { isMountPoint, readMountInfo } from "../../../src/sys/mountinfo.ts";
import type { Node, PersistentVolume, PersistentVolumeClaim, Pod, PodVolume } from "./k8s_types.ts";
import { emptyDirPath, VOL_DATA_FILE } from "./kubelet_paths.ts";
import { nodeSelectorMatches } from "../control_plane/scheduler.ts";

/** A volume that could not be set up; `message` is the event text. */
export class VolumeSetupError extends Error {
  override name = "VolumeSetupError";
}

/** Volume names referenced by some container of the pod (others are never mounted). */
export function referencedVolumes(pod: Pod): Set<string> {
  const names = new Set<string>();
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    for (const m of c.volumeMounts ?? []) names.add(m.name);
  }
  return names;
}

function processingError(volume: PodVolume, why: string): VolumeSetupError {
  return new VolumeSetupError(
    `Unable to attach or mount volumes: unmounted volumes=[${volume.name}], unattached volumes=[], failed to process volumes=[${volume.name}]: ${why}`,
  );
}

/** The error for a volume source the emulator does not handle. */
export function unsupportedVolume(volume: PodVolume): VolumeSetupError {
  const kind = Object.keys(volume).find((k) => k !== "name") ?? "unknown";
  return processingError(volume, `volume type "${kind}" is not supported by the kubelet emulator`);
}

/**
 * emptyDir: mode 0777, and with fsGroup the group and setgid bits `SetVolumeOwnership` sets
 * (2777, group fsGroup). Resolves with the host path.
 */
export async function setUpEmptyDir(root: string, pod: Pod, name: string): Promise<string> {
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

/**
 * `getPVCExtractPV`: the PVC must exist, not be deleted without protection, be Bound with a
 * `volumeName`; the PV must exist with `claimRef.uid` equal to the PVC's UID.
 * @throws {VolumeSetupError}
 */
export async function resolvePvcVolume(
  client: KubeClient,
  pod: Pod,
  volume: PodVolume,
): Promise<PersistentVolume> {
  const ns = pod.metadata.namespace;
  const claimName = volume.persistentVolumeClaim!.claimName;
  const fail = (why: string) =>
    processingError(volume, `error processing PVC ${ns}/${claimName}: ${why}`);
  const pvc = await client.get<PersistentVolumeClaim>(PVCS, claimName, ns);
  if (!pvc) throw fail(`PVC ${ns}/${claimName} not found`);
  if (
    pvc.metadata.deletionTimestamp &&
    !pvc.metadata.finalizers?.includes("kubernetes.io/pvc-protection")
  ) {
    throw fail(`can't start pod because PVC ${ns}/${claimName} is being deleted`);
  }
  if (pvc.status?.phase !== "Bound") throw fail("PVC is not bound");
  const pvName = pvc.spec.volumeName;
  if (!pvName) throw fail("PVC has empty volumeName");
  const pv = await client.get<PersistentVolume>(PVS, pvName);
  if (!pv) throw fail(`PV ${pvName} not found`);
  if (!pv.spec.claimRef || pv.spec.claimRef.uid !== pvc.metadata.uid) {
    throw fail(`PV ${pvName} has no claimRef or its claimRef UID does not match the PVC's`);
  }
  return pv;
}

/** "MountVolume.NodeAffinity check failed" when the PV's required node affinity excludes us. */
export async function checkPvNodeAffinity(
  client: KubeClient,
  nodeName: string,
  pv: PersistentVolume,
): Promise<void> {
  const required = pv.spec.nodeAffinity?.required;
  if (!required) return;
  const node = await client.get<Node>(NODES, nodeName);
  if (!node || !nodeSelectorMatches(required, node)) {
    throw new VolumeSetupError(
      `MountVolume.NodeAffinity check failed for volume "${pv.metadata.name}" : no matching NodeSelectorTerms`,
    );
  }
}

/**
 * `removeMountDir`: unless the target is still a mount point, rmdir `mount`, remove
 * `vol_data.json` and rmdir the PV dir. Resolves false when the target is still mounted.
 */
export async function removeMountDir(target: string): Promise<boolean> {
  if (isMountPoint(await readMountInfo(), target)) return false;
  const parent = target.slice(0, target.lastIndexOf("/"));
  await Deno.remove(target).catch(() => {});
  await Deno.remove(`${parent}/${VOL_DATA_FILE}`).catch(() => {});
  await Deno.remove(parent).catch(() => {});
  return true;
}
