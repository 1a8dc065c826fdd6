/**
 * Volume IDs of dynamically provisioned volumes. DeleteVolume receives only the ID (and secrets),
 * so the ID carries everything deletion needs, fixed at creation time:
 *
 * `s3:1:<mode b|p>:<policy r|e|a>:<credentials d|s>:<region>:<bucket>[:<prefix>]`
 *
 * e.g. `s3:1:b:e:d::pvc-0f3c…` (bucket mode, delete-if-empty, driver credentials, driver region)
 * or `s3:1:p:a:s:eu-west-1:shared:team-a/pvc-0f3c…/`. IDs stay within the CSI limit of 128 bytes.
 *
 * @module
 */
import type { DeletePolicy, Mode } from "./parameters.ts";

/** Longest volume ID (CSI "SHALL NOT exceed 128 bytes"). */
export const MAX_VOLUME_ID = 128;

/** What a volume ID records. */
export interface VolumeRef {
  /** Layout. */
  readonly mode: Mode;
  /** What DeleteVolume does. */
  readonly deletePolicy: DeletePolicy;
  /** Whether CreateVolume used provisioner secrets (DeleteVolume then requires them too). */
  readonly credentials: "driver" | "secret";
  /** Region, "" for the driver's default. */
  readonly region: string;
  /** Bucket. */
  readonly bucket: string;
  /** Key prefix of `prefix` volumes (ends with "/"); "" in bucket mode. */
  readonly prefix: string;
}

const POLICY_CODES: Record<DeletePolicy, string> = {
  "retain": "r",
  "delete-if-empty": "e",
  "delete-all": "a",
};

/** Encode `ref`. */
export function formatVolumeId(ref: VolumeRef): string {
  const parts = [
    "s3",
    "1",
    ref.mode === "bucket" ? "b" : "p",
    POLICY_CODES[ref.deletePolicy],
    ref.credentials === "driver" ? "d" : "s",
    ref.region,
    ref.bucket,
  ];
  if (ref.mode === "prefix") parts.push(ref.prefix);
  return parts.join(":");
}

/** Decode an ID made by {@link formatVolumeId}; undefined for anything else. */
export function parseVolumeId(id: string): VolumeRef | undefined {
  const parts = id.split(":");
  if (parts.length < 7 || parts[0] !== "s3" || parts[1] !== "1") return undefined;
  const [, , m, p, c, region, bucket, ...rest] = parts;
  const mode: Mode | undefined = m === "b" ? "bucket" : m === "p" ? "prefix" : undefined;
  const deletePolicy = (Object.keys(POLICY_CODES) as DeletePolicy[]).find((k) =>
    POLICY_CODES[k] === p
  );
  const credentials = c === "d" ? "driver" : c === "s" ? "secret" : undefined;
  if (!mode || !deletePolicy || !credentials || !bucket) return undefined;
  if (!/^[a-z0-9-]{0,32}$/.test(region!)) return undefined;
  const prefix = rest.join(":");
  if (mode === "bucket" && rest.length > 0) return undefined;
  if (mode === "prefix" && (!prefix.endsWith("/") || prefix.startsWith("/"))) return undefined;
  return { mode, deletePolicy, credentials, region: region!, bucket, prefix };
}
