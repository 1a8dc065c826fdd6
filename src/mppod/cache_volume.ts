/**
 * The engine's local data cache, on a volume of the Mountpoint Pod: PV volume attributes as the
 * upstream driver names them, parsed once here for both sides that act on them.
 *
 * | attribute                              | meaning                                                 |
 * | -------------------------------------- | ------------------------------------------------------- |
 * | `cache`                                | `emptyDir` or `ephemeral` (none when absent)            |
 * | `cacheEmptyDirSizeLimit`               | `emptyDir` size limit (quantity, e.g. `2Gi`); optional   |
 * | `cacheEmptyDirMedium`                  | `Memory` (tmpfs) or absent (the node's disk)            |
 * | `cacheEphemeralStorageClassName`       | StorageClass of the generic ephemeral volume (required) |
 * | `cacheEphemeralStorageResourceRequest` | its size (quantity, required)                           |
 *
 * The mount option `cache <path>` (upstream v1) still enables a cache: the path is ignored and an
 * `emptyDir` without a limit is used, as upstream v2 does. Both at once is refused.
 *
 * - Writer of the volume: the controller ({@link cacheVolume} in the Mountpoint Pod spec, mounted at
 *   {@link CACHE_DIR}; the sharing key carries {@link cacheKey} so volumes with different cache
 *   settings never share a Mountpoint Pod).
 * - Reader: the node plugin (checks the same attributes in NodePublishVolume, passes
 *   `--cache=/cache` and a `--max-cache-size` within the volume's limit) and the mounter (puts the
 *   engine's cache in its cache dir, never in the comm dir).
 *
 * Pure: unit-tested without permissions.
 *
 * @module
 */
import { bytesQuantity, nonNegativeQuantity, QUANTITY_PATTERN } from "../kube/quantity.ts";
import { fill } from "../util/message_template.ts";
import { CACHE_MESSAGES } from "./volume_messages.ts";

/** Name of the cache volume in Mountpoint Pods. */
export const CACHE_VOLUME_NAME = "cache";
/** Mount path of the cache volume in Mountpoint Pods; the value of `--cache` in mount messages. */
export const CACHE_DIR = "/cache";

/** PV volume attributes of the cache (the upstream driver's names). */
export const CACHE_ATTRIBUTES = {
  cache: "cache",
  emptyDirSizeLimit: "cacheEmptyDirSizeLimit",
  emptyDirMedium: "cacheEmptyDirMedium",
  ephemeralStorageClassName: "cacheEphemeralStorageClassName",
  ephemeralStorageResourceRequest: "cacheEphemeralStorageResourceRequest",
} as const;

/** Cache types. */
export const CACHE_TYPES = ["emptyDir", "ephemeral"] as const;

/** Label on the PVCs of ephemeral cache volumes. */
export const EPHEMERAL_CACHE_LABEL = "s3.csi.scality.com/type";
/** Value of {@link EPHEMERAL_CACHE_LABEL}. */
export const EPHEMERAL_CACHE_LABEL_VALUE = "local-ephemeral-cache";

/**
 * Share of an `emptyDir` size limit given to the engine as `--max-cache-size`: Mountpoint overshoots
 * its target by 1-2 %, and a disk-backed emptyDir over its limit gets the pod evicted.
 */
export const CACHE_LIMIT_SHARE = 0.95;

/**
 * Default size limit of a disk emptyDir cache whose PV names none (the deprecated `cache` mount
 * option, or `cache: emptyDir` without `cacheEmptyDirSizeLimit`); the deployment's
 * `mountpointPod.cacheSizeLimit` (`--mountpoint-cache-size-limit` of the controller and the node
 * plugin) overrides it.
 */
export const DEFAULT_CACHE_SIZE_LIMIT = "10Gi";

/** A cache on an emptyDir. */
export interface EmptyDirCache {
  readonly type: "emptyDir";
  /** Size limit as written (a quantity), when one is set. */
  readonly sizeLimit?: string;
  /** The limit in bytes. */
  readonly sizeLimitBytes?: number;
  /** `Memory` for tmpfs; absent for the node's disk. */
  readonly medium?: "Memory";
  /** Enabled by the deprecated `cache` mount option. */
  readonly fromMountOption?: boolean;
  /** The size limit is the default one ({@link withDefaultSizeLimit}), not the PV's. */
  readonly defaultSizeLimit?: boolean;
}

/** A cache on a generic ephemeral volume (a PVC per Mountpoint Pod). */
export interface EphemeralCache {
  readonly type: "ephemeral";
  readonly storageClassName: string;
  /** Requested size as written (a quantity). */
  readonly request: string;
  readonly requestBytes: number;
}

/** The cache of a volume. */
export type CacheConfig = EmptyDirCache | EphemeralCache;

/** Invalid cache settings; the message names the attribute and what to write. */
export class CacheConfigError extends Error {
  override name = "CacheConfigError";
}

/** A StorageClass name (a DNS subdomain). */
export const STORAGE_CLASS_NAME_PATTERN = "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$";
const STORAGE_CLASS_NAME = new RegExp(STORAGE_CLASS_NAME_PATTERN);

/** How messages name an attribute: "Volume attribute" (PV) or "parameter" (StorageClass). */
export type AttributeLabel = "Volume attribute" | "parameter";

/** Smallest emptyDir limit that leaves the engine 1 MiB: 95 % of it must reach 1 MiB. */
export const MIN_CACHE_LIMIT_BYTES = Math.ceil(2 ** 20 / CACHE_LIMIT_SHARE);

function positiveBytes(label: AttributeLabel, attr: string, value: string): number {
  const bytes = new RegExp(QUANTITY_PATTERN).test(value) ? nonNegativeQuantity(value) : undefined;
  if (bytes === undefined || bytes < 1 || !Number.isFinite(bytes)) {
    throw new CacheConfigError(
      fill(CACHE_MESSAGES.notPositive, { attribute: label, name: attr, value }),
    );
  }
  return Math.floor(bytes);
}

/**
 * The cache a volume asks for, from its volume attributes and whether its mount options have
 * `cache`; undefined when none.
 * @throws {CacheConfigError} naming the attribute and the fix
 */
export function parseCacheConfig(
  attrs: Readonly<Record<string, string>>,
  cacheMountOption: boolean,
  label: AttributeLabel = "Volume attribute",
): CacheConfig | undefined {
  const a = CACHE_ATTRIBUTES;
  const M = CACHE_MESSAGES;
  const attribute = label;
  const get = (k: string) => {
    const v = attrs[k];
    return v === undefined || v === "" ? undefined : v;
  };
  const type = get(a.cache);
  const emptyDirAttrs = [a.emptyDirSizeLimit, a.emptyDirMedium].filter((k) => get(k));
  const ephemeralAttrs = [a.ephemeralStorageClassName, a.ephemeralStorageResourceRequest].filter((
    k,
  ) => get(k));
  if (type !== undefined && cacheMountOption) {
    throw new CacheConfigError(fill(M.both, { cache: a.cache, type }));
  }
  if (type === undefined) {
    const stray = [...emptyDirAttrs, ...ephemeralAttrs];
    if (stray.length) {
      throw new CacheConfigError(
        fill(M.stray, {
          attribute,
          name: stray[0]!,
          cache: a.cache,
          type: emptyDirAttrs.length ? "emptyDir" : "ephemeral",
        }),
      );
    }
    return cacheMountOption ? { type: "emptyDir", fromMountOption: true } : undefined;
  }
  if (type === "emptyDir") {
    if (ephemeralAttrs.length) {
      throw new CacheConfigError(
        fill(M.notForEmptyDir, { attribute, name: ephemeralAttrs[0]!, cache: a.cache }),
      );
    }
    const medium = get(a.emptyDirMedium);
    if (medium !== undefined && medium !== "Memory") {
      throw new CacheConfigError(
        fill(M.medium, { attribute, name: a.emptyDirMedium, value: medium }),
      );
    }
    const limit = get(a.emptyDirSizeLimit);
    return {
      type: "emptyDir",
      ...(limit !== undefined
        ? { sizeLimit: limit, sizeLimitBytes: positiveBytes(label, a.emptyDirSizeLimit, limit) }
        : {}),
      ...(medium ? { medium: "Memory" as const } : {}),
    };
  }
  if (type === "ephemeral") {
    if (emptyDirAttrs.length) {
      throw new CacheConfigError(
        fill(M.notForEphemeral, { attribute, name: emptyDirAttrs[0]!, cache: a.cache }),
      );
    }
    const storageClassName = get(a.ephemeralStorageClassName);
    const request = get(a.ephemeralStorageResourceRequest);
    if (storageClassName === undefined || request === undefined) {
      throw new CacheConfigError(
        fill(M.ephemeralNeeds, {
          cache: a.cache,
          storageClass: a.ephemeralStorageClassName,
          request: a.ephemeralStorageResourceRequest,
        }),
      );
    }
    if (!STORAGE_CLASS_NAME.test(storageClassName)) {
      throw new CacheConfigError(
        fill(M.storageClass, {
          attribute,
          name: a.ephemeralStorageClassName,
          value: storageClassName,
        }),
      );
    }
    return {
      type: "ephemeral",
      storageClassName,
      request,
      requestBytes: positiveBytes(label, a.ephemeralStorageResourceRequest, request),
    };
  }
  throw new CacheConfigError(
    fill(M.type, { attribute, cache: a.cache, value: type, types: CACHE_TYPES.join(" or ") }),
  );
}

/**
 * The cache settings as one canonical string for the sharing key ("" when none): volumes whose
 * caches differ get different Mountpoint Pods.
 */
export function cacheKey(cache: CacheConfig | undefined): string {
  if (!cache) return "";
  if (cache.type === "ephemeral") {
    return `ephemeral;storageClassName=${cache.storageClassName};request=${
      bytesQuantity(cache.requestBytes)
    }`;
  }
  const parts = ["emptyDir"];
  if (cache.sizeLimitBytes !== undefined) {
    parts.push(`sizeLimit=${bytesQuantity(cache.sizeLimitBytes)}`);
  }
  if (cache.medium) parts.push(`medium=${cache.medium}`);
  return parts.join(";");
}

function defaultLimitBytes(sizeLimit: string): number {
  const bytes = new RegExp(QUANTITY_PATTERN).test(sizeLimit)
    ? nonNegativeQuantity(sizeLimit)
    : undefined;
  if (bytes === undefined || bytes < MIN_CACHE_LIMIT_BYTES || !Number.isFinite(bytes)) {
    throw new CacheConfigError(
      `The default cache size limit "${sizeLimit}" (mountpointPod.cacheSizeLimit, --mountpoint-cache-size-limit) is not a size of at least 2Mi: fix the deployment values`,
    );
  }
  return Math.floor(bytes);
}

/**
 * `cache` with `sizeLimit` when it is a disk emptyDir without a limit of its own: unbounded, it
 * could fill the node's disk (the engine's default keeps only 5 % of the file system free, and a
 * disk emptyDir reports the node's whole disk). Both sides apply it: the controller to the pod's
 * volume, the node plugin to the engine's `--max-cache-size`. A tmpfs (`Memory`) cache is bounded by
 * the pod's memory and an ephemeral volume by its size: both stay as they are.
 */
export function withDefaultSizeLimit(cache: CacheConfig, sizeLimit: string): CacheConfig {
  if (cache.type !== "emptyDir" || cache.medium || cache.sizeLimitBytes !== undefined) return cache;
  return {
    ...cache,
    sizeLimit,
    sizeLimitBytes: defaultLimitBytes(sizeLimit),
    defaultSizeLimit: true,
  };
}

/** The Mountpoint Pod volume of a cache (named {@link CACHE_VOLUME_NAME}). */
export function cacheVolume(cache: CacheConfig): Record<string, unknown> {
  if (cache.type === "emptyDir") {
    return {
      name: CACHE_VOLUME_NAME,
      emptyDir: {
        ...(cache.medium ? { medium: cache.medium } : {}),
        ...(cache.sizeLimit !== undefined ? { sizeLimit: cache.sizeLimit } : {}),
      },
    };
  }
  return {
    name: CACHE_VOLUME_NAME,
    ephemeral: {
      volumeClaimTemplate: {
        metadata: { labels: { [EPHEMERAL_CACHE_LABEL]: EPHEMERAL_CACHE_LABEL_VALUE } },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName: cache.storageClassName,
          volumeMode: "Filesystem",
          resources: { requests: { storage: cache.request } },
        },
      },
    },
  };
}

/**
 * The `--max-cache-size` (MiB) the engine gets for `cache`, given the volume's own value (MiB), or
 * undefined to leave the engine's default (keep 5 % of the cache's file system free).
 *
 * With an emptyDir size limit the engine's default cannot work (a disk-backed emptyDir reports the
 * node's whole disk) and overshooting the limit gets the pod evicted, so the size is at most
 * {@link CACHE_LIMIT_SHARE} of the limit; a larger explicit value is lowered to it, one above the
 * limit itself is refused.
 * @throws {CacheConfigError}
 */
export function maxCacheSizeMiB(
  cache: CacheConfig,
  requestedMiB: number | undefined,
): number | undefined {
  if (cache.type !== "emptyDir" || cache.sizeLimitBytes === undefined) return requestedMiB;
  const limitMiB = Math.floor(cache.sizeLimitBytes / 2 ** 20);
  const safeMiB = Math.floor((cache.sizeLimitBytes * CACHE_LIMIT_SHARE) / 2 ** 20);
  const name = CACHE_ATTRIBUTES.emptyDirSizeLimit;
  if (safeMiB < 1) {
    throw new CacheConfigError(
      fill(CACHE_MESSAGES.tooSmall, {
        attribute: "Volume attribute",
        name,
        value: cache.sizeLimit ?? "",
      }),
    );
  }
  if (requestedMiB !== undefined && requestedMiB > limitMiB) {
    throw new CacheConfigError(
      fill(cache.defaultSizeLimit ? CACHE_MESSAGES.exceedsDefault : CACHE_MESSAGES.exceeds, {
        requested: requestedMiB,
        name,
        value: cache.sizeLimit ?? "",
        limit: limitMiB,
      }),
    );
  }
  return Math.min(requestedMiB ?? safeMiB, safeMiB);
}
