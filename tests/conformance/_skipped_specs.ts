/**
 * Every csi-sanity spec that does not run against this driver, and why. Two kinds:
 *
 * - {@link NOT_ADVERTISED}: csi-sanity skips the spec itself because the driver does not
 *   advertise the capability or service it tests. The tier checks that each of these was skipped
 *   with exactly the expected message (so a newly advertised capability makes its specs run, and
 *   this list must then shrink), and that every other spec ran and passed.
 * - {@link EXCLUDED}: specs we skip with `--ginkgo.skip` although csi-sanity would run them. Only
 *   for a real inapplicability, never for a bug (bugs stay failing). None today.
 *
 * `README.md` of this folder lists the same specs; the tier fails when the two disagree.
 *
 * @module
 */

/**
 * The csi-sanity version these lists are complete for. The build falls back to v5.4.0 when the
 * local Go is older than 1.25; that version lacks some of the specs listed here (all of them
 * specs that do not run against this driver) and has no others.
 */
export const LISTED_VERSION = "v5.6.0";

/** Specs csi-sanity skips for one missing capability. */
export interface NotAdvertised {
  /** What the driver does not advertise. */
  readonly capability: string;
  /** Why that is right for an S3 driver. */
  readonly reason: string;
  /** csi-sanity's skip messages for these specs. */
  readonly skipMessages: readonly string[];
  /** Full spec texts (Ginkgo containers + It, without the suite name). */
  readonly specs: readonly string[];
}

/** A spec skipped with `--ginkgo.skip`. */
export interface Excluded {
  readonly spec: string;
  readonly reason: string;
}

const C = "Controller Service [Controller Server]";

/** Specs csi-sanity skips because a capability is not advertised. */
export const NOT_ADVERTISED: readonly NotAdvertised[] = [
  {
    capability: "Node STAGE_UNSTAGE_VOLUME",
    reason:
      "An S3 volume has no per-node device step: the FUSE mount is made at NodePublishVolume in the workload's Mountpoint Pod, so kubelet sends no staging path.",
    skipMessages: ["NodeStageVolume not supported", "NodeUnstageVolume not supported"],
    specs: [
      "Node Service NodeStageVolume should fail when no volume id is provided",
      "Node Service NodeStageVolume should fail when no staging target path is provided",
      "Node Service NodeStageVolume should fail when no volume capability is provided",
      "Node Service NodeUnstageVolume should fail when no volume id is provided",
      "Node Service NodeUnstageVolume should fail when no staging target path is provided",
    ],
  },
  {
    capability: "Node and Controller EXPAND_VOLUME",
    reason:
      "An S3 bucket or prefix has no size to grow; the capacity in CreateVolume is echoed only.",
    skipMessages: ["NodeExpandVolume not supported", "ControllerExpandVolume not supported"],
    specs: [
      "Node Service NodeExpandVolume should fail when no volume id is provided",
      "Node Service NodeExpandVolume should fail when no volume path is provided",
      "Node Service NodeExpandVolume should fail when volume is not found",
      "Node Service NodeExpandVolume should work if node-expand is called after node-publish",
      "ExpandVolume [Controller Server] should fail if no volume id is given",
      "ExpandVolume [Controller Server] should fail if no capacity range is given",
      "ExpandVolume [Controller Server] should work",
    ],
  },
  {
    capability: "Node SINGLE_NODE_MULTI_WRITER",
    reason:
      "Not advertised, so kubelet maps ReadWriteOncePod to SINGLE_NODE_WRITER and enforces the single pod itself; an S3 mount has no writer exclusivity of its own.",
    skipMessages: ["Service does not have single node multi writer capability"],
    specs: [
      "Node Service NodePublishVolume with single node multi writer capability should fail when volume with single node single writer access mode is already mounted at a different target path",
    ],
  },
  {
    capability:
      "Node GET_VOLUME_HEALTH, GET_STORAGE_HEALTH; Controller GET_VOLUME_HEALTH, LIST_VOLUME_HEALTH",
    reason:
      "Health RPCs added after CSI 1.12, the contract the driver implements; volume health is reported through NodeGetVolumeStats' VolumeCondition (VOLUME_CONDITION), which runs.",
    skipMessages: [
      "NodeGetVolumeHealth not supported",
      "NodeGetStorageHealth not supported",
      "ControllerGetVolumeHealth not supported",
      "ControllerListVolumeHealth not supported",
    ],
    specs: [
      "Node Service NodeGetVolumeHealth should fail when no volume id is provided",
      "Node Service NodeGetVolumeHealth should return health for a valid volume",
      "Node Service NodeGetStorageHealth should return appropriate response",
      "ControllerGetVolumeHealth [Controller Server] should fail when no volume id is provided",
      "ControllerGetVolumeHealth [Controller Server] should return health for a valid volume",
      "ControllerListVolumeHealth [Controller Server] should return appropriate response",
    ],
  },
  {
    capability: "Controller PUBLISH_UNPUBLISH_VOLUME",
    reason:
      "Nothing is attached to a node (CSIDriver attachRequired: false): a bucket is reachable from every node.",
    skipMessages: [
      "ControllerPublishVolume not supported",
      "ControllerUnpublishVolume not supported",
      "Controller Publish, UnpublishVolume not supported",
    ],
    specs: [
      `${C} ControllerPublishVolume should fail when no volume id is provided`,
      `${C} ControllerPublishVolume should fail when no node id is provided`,
      `${C} ControllerPublishVolume should fail when no volume capability is provided`,
      `${C} ControllerPublishVolume should fail when publishing more volumes than the node max attach limit`,
      `${C} ControllerPublishVolume should fail when the volume does not exist`,
      `${C} ControllerPublishVolume should fail when the node does not exist`,
      `${C} ControllerPublishVolume should fail when the volume is already published but is incompatible`,
      `${C} ControllerUnpublishVolume should fail when no volume id is provided`,
      `${C} volume lifecycle should work`,
      `${C} volume lifecycle should be idempotent`,
    ],
  },
  {
    capability: "Controller GET_CAPACITY",
    reason:
      "S3 capacity is not bounded per node or topology; there is no storage-capacity tracking.",
    skipMessages: ["GetCapacity not supported"],
    specs: [`${C} GetCapacity should return capacity (no optional values added)`],
  },
  {
    capability: "Controller LIST_VOLUMES",
    reason:
      "Volumes are known from their PersistentVolumes; csi-provisioner does not need ListVolumes.",
    skipMessages: ["ListVolumes not supported"],
    specs: [
      `${C} ListVolumes should return appropriate values (no optional values added)`,
      `${C} ListVolumes should fail when an invalid starting_token is passed`,
      `${C} ListVolumes check the presence of new volumes and absence of deleted ones in the volume list`,
    ],
  },
  {
    capability: "Controller CREATE_DELETE_SNAPSHOT, LIST_SNAPSHOTS",
    reason:
      "The driver offers no snapshots of buckets or prefixes (CreateVolume refuses a snapshot data source).",
    skipMessages: [
      "CreateSnapshot not supported",
      "DeleteSnapshot not supported",
      "ListSnapshots not supported",
      "GetSnapshot not supported",
      "Snapshot not supported",
    ],
    specs: [
      `${C} CreateVolume should create volume from an existing source snapshot`,
      `${C} CreateVolume should fail when the volume source snapshot is not found`,
      "CreateSnapshot [Controller Server] should fail when no name is provided",
      "CreateSnapshot [Controller Server] should fail when no source volume id is provided",
      "CreateSnapshot [Controller Server] should succeed when requesting to create a snapshot with already existing name and same source volume ID",
      "CreateSnapshot [Controller Server] should fail when requesting to create a snapshot with already existing name and different source volume ID",
      "CreateSnapshot [Controller Server] should succeed when creating snapshot with maximum-length name",
      "CreateSnapshot [Controller Server] should succeed when creating a snapshot with accessibility requirements",
      "DeleteSnapshot [Controller Server] should fail when no snapshot id is provided",
      "DeleteSnapshot [Controller Server] should succeed when an invalid snapshot id is used",
      "DeleteSnapshot [Controller Server] should return appropriate values (no optional values added)",
      "ListSnapshots [Controller Server] should return appropriate values (no optional values added)",
      "ListSnapshots [Controller Server] should return snapshots that match the specified snapshot id",
      "ListSnapshots [Controller Server] should return empty when the specified snapshot id does not exist",
      "ListSnapshots [Controller Server] should return snapshots that match the specified source volume id",
      "ListSnapshots [Controller Server] should return empty when the specified source volume id does not exist",
      "ListSnapshots [Controller Server] check the presence of new snapshots in the snapshot list",
      "ListSnapshots [Controller Server] should return next token when a limited number of entries are requested",
      "GetSnapshot [Controller Server] should return an error",
      "GetSnapshot [Controller Server] should return snapshot that match the specified snapshot id",
      "GetSnapshot [Controller Server] should return an error when the specified snapshot id does not exist",
    ],
  },
  {
    capability: "Controller CLONE_VOLUME",
    reason:
      "A volume cannot be created from another volume (CreateVolume refuses a volume data source).",
    skipMessages: ["Volume Cloning not supported"],
    specs: [
      `${C} CreateVolume should create volume from an existing source volume`,
      `${C} CreateVolume should fail when the volume source volume is not found`,
    ],
  },
  {
    capability: "Controller MODIFY_VOLUME",
    reason:
      "No mutable parameters (VolumeAttributesClass); mount settings live in the PV and StorageClass.",
    skipMessages: [
      "ControllerModifyVolume not supported",
      "Modify volume not supported",
      "Modify Volume not supported",
    ],
    specs: [
      `${C} CreateVolume should create volume with a volume attribute class`,
      `${C} CreateVolume should not create volume with an invalid volume attribute class`,
      "ModifyVolume [Controller Server] should fail if no volume id is given",
      "ModifyVolume [Controller Server] should fail if volume does not exist",
      "ModifyVolume [Controller Server] should fail if specified mutable parameters are not supported by the volume",
      "ModifyVolume [Controller Server] should modify a volume created without a volume attribute class",
      "ModifyVolume [Controller Server] should modify a volume created with a volume attribute class",
      "ModifyVolume [Controller Server] should fail to modify a volume created with a volume attribute class if new mutable parameters are not supported by volume",
    ],
  },
  {
    capability: "Plugin GROUP_CONTROLLER_SERVICE",
    reason: "No volume group snapshots (there are no snapshots at all).",
    skipMessages: ["GroupControllerService not supported"],
    specs: [
      "GroupController Service [GroupController Server] GroupControllerGetCapabilities should return appropriate capabilities",
      "GroupController Service [GroupController VolumeGroupSnapshots] CreateVolumeGroupSnapshot should fail when no name is provided",
      "GroupController Service [GroupController VolumeGroupSnapshots] GetVolumeGroupSnapshot should fail when no volume id is provided",
      "GroupController Service [GroupController VolumeGroupSnapshots] GetVolumeGroupSnapshot should fail when an invalid volume id is used",
      "GroupController Service [GroupController VolumeGroupSnapshots] DeleteVolumeGroupSnapshot should fail when no volume id is provided",
      "GroupController Service [GroupController VolumeGroupSnapshots] DeleteVolumeGroupSnapshot should succeed when an invalid volume id is used",
    ],
  },
];

/** Specs skipped with `--ginkgo.skip` (each a real inapplicability). */
export const EXCLUDED: readonly Excluded[] = [];

/** Every spec that is expected not to run, with the reason. */
export function expectedNotToRun(): Map<string, string> {
  const out = new Map<string, string>();
  for (const g of NOT_ADVERTISED) {
    for (const s of g.specs) out.set(s, `${g.capability} not advertised: ${g.reason}`);
  }
  for (const e of EXCLUDED) out.set(e.spec, `excluded: ${e.reason}`);
  return out;
}
