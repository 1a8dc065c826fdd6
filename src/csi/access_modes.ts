/**
 * Access modes a bucket can be published and provisioned with: every mode, since S3 is shared by
 * nature; the read-only ones publish a read-only mount.
 *
 * Readers: `src/node/` (NodePublishVolume), `src/provisioning/` (CreateVolume,
 * ValidateVolumeCapabilities).
 *
 * @module
 */
import type { VolumeCapability_AccessMode_Mode } from "./gen/csi_types.ts";

/** Access modes a bucket can be published with. */
export const SUPPORTED_ACCESS_MODES: readonly VolumeCapability_AccessMode_Mode[] = [
  "MULTI_NODE_MULTI_WRITER",
  "MULTI_NODE_READER_ONLY",
  "SINGLE_NODE_WRITER",
  "SINGLE_NODE_READER_ONLY",
  "SINGLE_NODE_SINGLE_WRITER",
  "SINGLE_NODE_MULTI_WRITER",
];
