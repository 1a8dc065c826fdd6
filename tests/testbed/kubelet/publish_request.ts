/**
 * The NodePublishVolume request kubelet v1.32 builds for a CSI volume, PVC-backed or inline, field
 * by field (`SetUpAt` in `pkg/volume/csi/csi_mounter.go` of `k8s.io/kubernetes`). An inline volume
 * is handled as the PV it stands for ({@link inlineVolumeSpec}). Pure: the caller fetches the
 * objects and capabilities.
 *
 * @module
 */
import type {
  NodePublishVolumeRequest,
  NodeUnpublishVolumeRequest,
  VolumeCapability_AccessMode_Mode,
} from "../../../src/csi/gen/csi_types.ts";
import { csiTargetPath, sha256Hex } from "./kubelet_paths.ts";
import type { PersistentVolume, Pod, PodVolume } from "./k8s_types.ts";

/** Pod-info keys kubelet adds to `volume_context` when the CSIDriver has `podInfoOnMount`. */
export const POD_INFO_KEYS = {
  name: "csi.storage.k8s.io/pod.name",
  namespace: "csi.storage.k8s.io/pod.namespace",
  uid: "csi.storage.k8s.io/pod.uid",
  serviceAccount: "csi.storage.k8s.io/serviceAccount.name",
  ephemeral: "csi.storage.k8s.io/ephemeral",
} as const;

/**
 * CSI access mode for the PV's first access mode (`asCSIAccessModeV1` and the
 * SINGLE_NODE_MULTI_WRITER-capable variant). A nil list counts as ReadWriteOnce.
 */
export function csiAccessMode(
  pvAccessModes: readonly string[] | undefined,
  singleNodeMultiWriter: boolean,
): VolumeCapability_AccessMode_Mode {
  const first = pvAccessModes?.length ? pvAccessModes[0] : "ReadWriteOnce";
  switch (first) {
    case "ReadWriteOnce":
      return singleNodeMultiWriter ? "SINGLE_NODE_MULTI_WRITER" : "SINGLE_NODE_WRITER";
    case "ReadOnlyMany":
      return "MULTI_NODE_READER_ONLY";
    case "ReadWriteMany":
      return "MULTI_NODE_MULTI_WRITER";
    case "ReadWriteOncePod":
      return singleNodeMultiWriter ? "SINGLE_NODE_SINGLE_WRITER" : "SINGLE_NODE_WRITER";
    default:
      return "UNKNOWN";
  }
}

/** `makeVolumeHandle`: the handle of an inline volume, `csi-<sha256(podUID + name)>`. */
export function inlineVolumeHandle(podUID: string, volumeName: string): string {
  return `csi-${sha256Hex(`${podUID}${volumeName}`)}`;
}

/**
 * An inline `csi:` volume as the CSI plugin sees it: named after the pod volume, its handle
 * {@link inlineVolumeHandle}, no mount options, access mode ReadWriteOnce, its Secret in the
 * pod's namespace.
 */
export function inlineVolumeSpec(pod: Pod, volume: PodVolume): PersistentVolume {
  const csi = volume.csi!;
  return {
    metadata: { name: volume.name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      csi: {
        driver: csi.driver,
        volumeHandle: inlineVolumeHandle(pod.metadata.uid, volume.name),
        ...(csi.fsType ? { fsType: csi.fsType } : {}),
        ...(csi.volumeAttributes ? { volumeAttributes: csi.volumeAttributes } : {}),
        ...(csi.nodePublishSecretRef
          ? {
            nodePublishSecretRef: {
              ...csi.nodePublishSecretRef,
              namespace: pod.metadata.namespace,
            },
          }
          : {}),
      },
    },
  };
}

/** `volume_context`: PV attributes, then (if `podInfoOnMount`) the pod-info keys, overwriting. */
export function publishVolumeContext(
  pv: PersistentVolume,
  pod: Pod,
  podInfoOnMount: boolean,
  ephemeral = false,
): Record<string, string> {
  const ctx: Record<string, string> = { ...(pv.spec.csi?.volumeAttributes ?? {}) };
  if (podInfoOnMount) {
    ctx[POD_INFO_KEYS.name] = pod.metadata.name;
    ctx[POD_INFO_KEYS.namespace] = pod.metadata.namespace;
    ctx[POD_INFO_KEYS.uid] = pod.metadata.uid;
    ctx[POD_INFO_KEYS.serviceAccount] = pod.spec.serviceAccountName ?? "";
    ctx[POD_INFO_KEYS.ephemeral] = String(ephemeral);
  }
  return ctx;
}

/** Inputs of {@link buildPublishRequest}. */
export interface PublishInputs {
  readonly kubeletRoot: string;
  readonly pod: Pod;
  readonly pv: PersistentVolume;
  /** `pod.spec.volumes[].persistentVolumeClaim.readOnly` (inline: `csi.readOnly`). */
  readonly readOnly: boolean;
  /** An inline volume ({@link inlineVolumeSpec}). */
  readonly ephemeral?: boolean;
  /** CSIDriver `podInfoOnMount`. */
  readonly podInfoOnMount: boolean;
  /** `data` of the nodePublish secret, base64-decoded; undefined when the PV names none. */
  readonly secrets: Record<string, string> | undefined;
  /** Node capabilities advertised by the driver. */
  readonly volumeMountGroup: boolean;
  readonly singleNodeMultiWriter: boolean;
}

/**
 * The request, with absent fields left out exactly as kubelet leaves them empty (no
 * `publish_context`, no `staging_target_path`, no `secrets` without a secret ref).
 */
export function buildPublishRequest(i: PublishInputs): NodePublishVolumeRequest {
  const csi = i.pv.spec.csi!;
  const fsGroup = i.pod.spec.securityContext?.fsGroup;
  const mount: NonNullable<NodePublishVolumeRequest["volumeCapability"]>["mount"] = {
    fsType: csi.fsType ?? "",
    mountFlags: [...(i.pv.spec.mountOptions ?? [])],
    volumeMountGroup: i.volumeMountGroup && fsGroup !== undefined ? String(fsGroup) : "",
  };
  const request: NodePublishVolumeRequest = {
    volumeId: csi.volumeHandle,
    targetPath: csiTargetPath(i.kubeletRoot, i.pod.metadata.uid, i.pv.metadata.name),
    volumeCapability: {
      mount,
      accessMode: { mode: csiAccessMode(i.pv.spec.accessModes, i.singleNodeMultiWriter) },
    },
    readonly: i.readOnly,
    volumeContext: publishVolumeContext(i.pv, i.pod, i.podInfoOnMount, i.ephemeral ?? false),
  };
  if (i.secrets && Object.keys(i.secrets).length) request.secrets = { ...i.secrets };
  return request;
}

/** NodeUnpublishVolume: only the volume id (from `vol_data.json`) and the target path. */
export function buildUnpublishRequest(
  volumeHandle: string,
  targetPath: string,
): NodeUnpublishVolumeRequest {
  return { volumeId: volumeHandle, targetPath };
}

/** Decode a Secret's base64 `data` into strings, as kubelet sends them. */
export function decodeSecretData(data: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data ?? {})) {
    const bin = atob(v);
    out[k] = new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  }
  return out;
}
