/**
 * What `csi-provisioner` (external-provisioner v5/v6) builds, as pure functions (`Provision` in its
 * `pkg/controller/controller.go`): the CreateVolume request from a PVC and its StorageClass
 * (parameters stripped of the sidecar's `csi.storage.k8s.io/*` keys, one capability per access
 * mode, secret references with
 * `${pv.name}`/`${pvc.name}`/`${pvc.namespace}`/`${pvc.annotations['k']}` templates) and the
 * PersistentVolume it creates from the response.
 *
 * @module
 */
import type {
  CreateVolumeRequest,
  Volume,
  VolumeCapability,
  VolumeCapability_AccessMode_Mode,
} from "../../../src/csi/gen/csi_types.ts";
import type { ObjectMeta } from "../../../src/kube/client.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../../src/kube/types.ts";
import { bytesQuantity, nonNegativeQuantity } from "../../../src/kube/quantity.ts";

/** A StorageClass (the fields the provisioner reads). */
export interface StorageClass {
  /** `storage.k8s.io/v1`. */
  apiVersion?: string;
  /** `StorageClass`. */
  kind?: string;
  /** Name etc. */
  metadata: ObjectMeta;
  /** Driver name. */
  provisioner: string;
  /** Parameters, including the sidecar's `csi.storage.k8s.io/*` keys. */
  parameters?: Record<string, string>;
  /** `Delete` (API default) or `Retain`. */
  reclaimPolicy?: string;
  /** Copied to the PV. */
  mountOptions?: string[];
  /** `Immediate` or `WaitForFirstConsumer`. */
  volumeBindingMode?: string;
  /** Other fields. */
  [k: string]: unknown;
}

/** A problem that retrying will not fix until the objects change. */
export class ProvisionError extends Error {
  /** Error name. */
  override name = "ProvisionError";
}

const PREFIX = "csi.storage.k8s.io/";
const SECRET_TYPES = [
  "provisioner",
  "controller-publish",
  "node-stage",
  "node-publish",
  "controller-expand",
  "node-expand",
  "controller-modify",
] as const;
/** Secret types. */
export type SecretType = typeof SECRET_TYPES[number];
const RESERVED = new Set([
  "fstype",
  "secret-name",
  "secret-namespace",
  ...SECRET_TYPES.flatMap((t) => [`${t}-secret-name`, `${t}-secret-namespace`]),
]);

/** PV annotations of the provisioner. */
export const ANN = {
  provisionedBy: "pv.kubernetes.io/provisioned-by",
  deletionSecretName: "volume.kubernetes.io/provisioner-deletion-secret-name",
  deletionSecretNamespace: "volume.kubernetes.io/provisioner-deletion-secret-namespace",
  storageProvisioner: "volume.kubernetes.io/storage-provisioner",
  betaStorageProvisioner: "volume.beta.kubernetes.io/storage-provisioner",
  selectedNode: "volume.kubernetes.io/selected-node",
  betaStorageClass: "volume.beta.kubernetes.io/storage-class",
} as const;
/** The provisioner's PV finalizer. */
export const PV_FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer";

/** The PVC's class: the beta annotation first, else `spec.storageClassName`. */
export function claimClass(pvc: PersistentVolumeClaim): string {
  return pvc.metadata.annotations?.[ANN.betaStorageClass] ?? pvc.spec.storageClassName ?? "";
}

/** The PV name of a claim (`pvc-<uid>`). */
export function volumeNameFor(pvc: PersistentVolumeClaim): string {
  return `pvc-${pvc.metadata.uid}`;
}

/** StorageClass parameters without the sidecar's keys. @throws {ProvisionError} on unknown reserved keys */
export function stripParameters(params: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) {
    if (k.startsWith(PREFIX)) {
      if (RESERVED.has(k.slice(PREFIX.length))) continue;
      throw new ProvisionError(
        `found unknown parameter key "${k}" with reserved namespace ${PREFIX}`,
      );
    }
    if (k.toLowerCase() === "fstype") continue;
    out[k] = v;
  }
  return out;
}

function resolveTemplate(
  template: string,
  vars: Record<string, string>,
  what: string,
): string {
  const missing: string[] = [];
  const out = template.replace(/\$\{([^}]*)\}/g, (_, token: string) => {
    const v = vars[token];
    if (v === undefined) missing.push(token);
    return v ?? "";
  });
  if (missing.length > 0) {
    throw new ProvisionError(`${what}: invalid tokens: ${JSON.stringify(missing)}`);
  }
  return out;
}

/**
 * The Secret reference of `type` from StorageClass parameters (specific pair, else the generic
 * `secret-name`/`secret-namespace` pair), templates resolved; undefined when none is configured.
 * @throws {ProvisionError} half a pair, bad tokens, invalid names
 */
export function secretRef(
  params: Record<string, string>,
  type: SecretType,
  pvc: PersistentVolumeClaim,
  pvName: string,
): { name: string; namespace: string } | undefined {
  let nameTpl = params[`${PREFIX}${type}-secret-name`];
  let nsTpl = params[`${PREFIX}${type}-secret-namespace`];
  if (nameTpl === undefined && nsTpl === undefined) {
    nameTpl = params[`${PREFIX}secret-name`];
    nsTpl = params[`${PREFIX}secret-namespace`];
  }
  if (nameTpl === undefined && nsTpl === undefined) return undefined;
  if (!nameTpl || !nsTpl) {
    throw new ProvisionError(
      `${type} secret: both ${PREFIX}${type}-secret-name and -namespace must be set`,
    );
  }
  const nsVars = { "pv.name": pvName, "pvc.namespace": pvc.metadata.namespace ?? "" };
  const nameVars: Record<string, string> = { ...nsVars, "pvc.name": pvc.metadata.name ?? "" };
  for (const [k, v] of Object.entries(pvc.metadata.annotations ?? {})) {
    nameVars[`pvc.annotations['${k}']`] = v;
  }
  const namespace = resolveTemplate(nsTpl, nsVars, `${type} secret namespace`);
  const name = resolveTemplate(nameTpl, nameVars, `${type} secret name`);
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) {
    throw new ProvisionError(`${type} secret namespace "${namespace}" is not a DNS label`);
  }
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)) {
    throw new ProvisionError(`${type} secret name "${name}" is not a DNS subdomain`);
  }
  return { name, namespace };
}

const ACCESS_MODES: Record<string, VolumeCapability_AccessMode_Mode> = {
  ReadWriteOnce: "SINGLE_NODE_WRITER",
  ReadWriteOncePod: "SINGLE_NODE_WRITER",
  ReadOnlyMany: "MULTI_NODE_READER_ONLY",
  ReadWriteMany: "MULTI_NODE_MULTI_WRITER",
};

/** Bytes of a quantity such as `5Gi`. @throws {ProvisionError} */
export function quantityBytes(q: string): number {
  const bytes = nonNegativeQuantity(q);
  if (bytes === undefined) throw new ProvisionError(`invalid storage request "${q}"`);
  return Math.ceil(bytes);
}

/** The CreateVolume request for `pvc` (secrets filled in by the caller). */
export function createVolumeRequest(
  pvc: PersistentVolumeClaim,
  sc: StorageClass,
): CreateVolumeRequest {
  const params = sc.parameters ?? {};
  const fsType = params[`${PREFIX}fstype`] ?? params["fstype"] ?? "";
  const block = pvc.spec.volumeMode === "Block";
  const capabilities: VolumeCapability[] = (pvc.spec.accessModes ?? []).map((m) => ({
    ...(block
      ? { block: {}, accessType: "block" as const }
      : { mount: { fsType, mountFlags: sc.mountOptions ?? [] }, accessType: "mount" as const }),
    accessMode: { mode: ACCESS_MODES[m] ?? "UNKNOWN" },
  }));
  const storage = pvc.spec.resources?.requests?.storage;
  return {
    name: volumeNameFor(pvc),
    capacityRange: { requiredBytes: storage ? quantityBytes(storage) : 0 },
    volumeCapabilities: capabilities,
    parameters: stripParameters(params),
    secrets: {},
  };
}

/** The PV for a created volume, as the sidecar builds it after CreateVolume. */
export function persistentVolume(
  pvc: PersistentVolumeClaim,
  sc: StorageClass,
  volume: Volume,
  provisionerIdentity: string,
  secretRefs: Partial<Record<SecretType, { name: string; namespace: string }>>,
): PersistentVolume {
  const requested = pvc.spec.resources?.requests?.storage ?? "0";
  const capacity = volume.capacityBytes ? bytesQuantity(Number(volume.capacityBytes)) : requested;
  const prov = secretRefs.provisioner;
  const csi: Record<string, unknown> = {
    driver: sc.provisioner,
    volumeHandle: volume.volumeId ?? "",
    volumeAttributes: {
      "storage.kubernetes.io/csiProvisionerIdentity": provisionerIdentity,
      ...(volume.volumeContext ?? {}),
    },
  };
  const fsType = sc.parameters?.[`${PREFIX}fstype`];
  if (fsType && pvc.spec.volumeMode !== "Block") csi.fsType = fsType;
  const refFields: [SecretType, string][] = [
    ["controller-publish", "controllerPublishSecretRef"],
    ["node-stage", "nodeStageSecretRef"],
    ["node-publish", "nodePublishSecretRef"],
    ["controller-expand", "controllerExpandSecretRef"],
    ["node-expand", "nodeExpandSecretRef"],
  ];
  for (const [type, field] of refFields) {
    if (secretRefs[type]) csi[field] = secretRefs[type];
  }
  const spec: PersistentVolume["spec"] = {
    accessModes: pvc.spec.accessModes ?? [],
    capacity: { storage: capacity },
    csi: csi as unknown as NonNullable<PersistentVolume["spec"]["csi"]>,
    persistentVolumeReclaimPolicy: sc.reclaimPolicy ?? "Delete",
    storageClassName: claimClass(pvc),
    claimRef: {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      namespace: pvc.metadata.namespace ?? "",
      name: pvc.metadata.name ?? "",
      uid: pvc.metadata.uid ?? "",
      resourceVersion: pvc.metadata.resourceVersion ?? "",
    },
  };
  if (sc.mountOptions?.length) spec.mountOptions = sc.mountOptions;
  if (pvc.spec.volumeMode) spec.volumeMode = pvc.spec.volumeMode;
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: volumeNameFor(pvc),
      annotations: {
        [ANN.provisionedBy]: sc.provisioner,
        [ANN.deletionSecretName]: prov?.name ?? "",
        [ANN.deletionSecretNamespace]: prov?.namespace ?? "",
      },
      finalizers: [PV_FINALIZER],
    },
    spec,
  };
}
