/**
 * Validation of NodePublishVolume requests, before anything is touched: volume id, target path
 * (inside the kubelet dir, in the kubelet's CSI target shape), volume capability and access mode,
 * volume context (`bucketName`, `authenticationSource`, `engine`, `prefix`, `region`, the local
 * cache `cache*`), the mount options (allow-list) and the connection keys of the node-publish
 * Secret (`endpoint`, `region`: the volume's own S3 endpoint, see {@link secretConnection}). The
 * result is a {@link PublishParams} with the driver's own options added.
 *
 * Validation is complete: every rule the mounter and the engine apply to the options later is
 * applied here too (option combinations mount-s3 refuses, options rclone cannot honour, a cache
 * within its volume's size limit), so nothing is mounted for a request that would be refused
 * after the FUSE mount exists.
 *
 * Pure: no I/O, so every rule is unit-tested without permissions.
 *
 * @module
 */
import type {
  NodePublishVolumeRequest,
  VolumeCapability,
  VolumeCapability_AccessMode_Mode,
} from "../csi/gen/csi_types.ts";
import { invalidArgument } from "../csi/errors.ts";
import { SECRET_KEYS } from "../csi/secret_keys.ts";
import { EndpointUrlError, parseS3Endpoint } from "../s3/endpoint_url.ts";
import { SUPPORTED_ACCESS_MODES } from "../csi/access_modes.ts";
import { VOLUME_CONTEXT } from "../csi/volume_context.ts";
import {
  inlineAuthenticationProblem,
  inlineAuthenticationSource,
  splitMountOptions,
} from "../csi/inline_volume.ts";
import type { AuthenticationSource } from "../api/mountpoint_s3_pod_attachment.ts";
import { DEFAULT_ENGINE, type Engine, ENGINES, mountArgProblem } from "../mppod/mount_message.ts";
import {
  CACHE_ATTRIBUTES,
  CACHE_DIR,
  type CacheConfig,
  CacheConfigError,
  DEFAULT_CACHE_SIZE_LIMIT,
  maxCacheSizeMiB,
  parseCacheConfig,
  withDefaultSizeLimit,
} from "../mppod/cache_volume.ts";
import { engineOptionsProblem } from "../mppod/engine_support.ts";
import { parseTargetPath } from "../mppod/paths.ts";
import {
  ATTRIBUTE_MESSAGES,
  CACHE_MESSAGES,
  COMBINATION_MESSAGES,
} from "../mppod/volume_messages.ts";
import { AUTHENTICATION_SOURCES, VOLUME_BUCKET_PATTERN } from "../csi/volume_context.ts";
import { fill } from "../util/message_template.ts";
import { firstChars } from "../util/value_rules.ts";
import { type MountOptions, parseMountOptions, renderArgs } from "./mount_options.ts";

const READ_ONLY_MODES: readonly VolumeCapability_AccessMode_Mode[] = [
  "MULTI_NODE_READER_ONLY",
  "SINGLE_NODE_READER_ONLY",
];

/** Dir and file modes given to an fsGroup (group members may read and write). */
export const FS_GROUP_DIR_MODE = "0770";
/** File mode given with an fsGroup. */
export const FS_GROUP_FILE_MODE = "0660";

const BUCKET_REGEXP = new RegExp(VOLUME_BUCKET_PATTERN);
// deno-lint-ignore no-control-regex
const CONTROL_REGEXP = /[\x00-\x1f\x7f]/;

/** A validated publish request. */
export interface PublishParams {
  /** CSI volume handle. */
  readonly volumeId: string;
  /** The kubelet's target path (`…/mount`). */
  readonly targetPath: string;
  /** Workload pod UID (from the target path, cross-checked with the volume context). */
  readonly podUID: string;
  /** PV name (from the target path). */
  readonly volumeName: string;
  /** Bucket. */
  readonly bucket: string;
  /** The FUSE source is mounted read-only (read-only option or a reader-only access mode). */
  readonly readOnlyVolume: boolean;
  /** The workload's bind mount is read-only (`readonly` field or {@link readOnlyVolume}). */
  readonly readOnlyTarget: boolean;
  /** Where S3 credentials come from. */
  readonly authenticationSource: AuthenticationSource;
  /** An inline (ephemeral) volume: the pod's own `csi:` volume, not a PersistentVolume. */
  readonly ephemeral: boolean;
  /**
   * With `pod` authentication: kubelet's service account tokens (JSON, secret) and the workload's
   * ServiceAccount (`namespace/name`).
   */
  readonly podIdentity: {
    readonly serviceAccountTokens: string | undefined;
    readonly serviceAccount: string;
  } | undefined;
  /**
   * The volume's own S3 endpoint (`scheme://host[:port]`, from its node-publish Secret); the
   * driver's endpoint when undefined.
   */
  readonly endpoint: string | undefined;
  /** The volume's engine (its `engine` attribute, else the node's default). */
  readonly engine: Engine;
  /** The volume's local cache (`--cache` points at the Mountpoint Pod's cache volume). */
  readonly cache: CacheConfig | undefined;
  /** Workload fsGroup (`volume_mount_group`), when kubelet sent one. */
  readonly fsGroup: number | undefined;
  /** Mount options after the driver's additions. */
  readonly options: MountOptions;
}

/** Check a volume id. @throws {CsiError} InvalidArgument */
export function checkVolumeId(volumeId: string | null | undefined): string {
  if (!volumeId) throw invalidArgument("Volume ID not provided");
  if (volumeId.length > 1024 || CONTROL_REGEXP.test(volumeId)) {
    throw invalidArgument(`Volume ID "${volumeId.slice(0, 80)}" is malformed`);
  }
  return volumeId;
}

/**
 * Check a target path: absolute, no `.`/`..` segments or empty segments, inside the kubelet dir
 * and shaped `<kubelet>/pods/<podUID>/volumes/kubernetes.io~csi/<pv>/mount`.
 * @throws {CsiError} InvalidArgument
 */
export function checkTargetPath(
  kubeletRoot: string,
  targetPath: string | null | undefined,
  field = "Target path",
): { podUID: string; volumeName: string } {
  if (!targetPath) throw invalidArgument(`${field} not provided`);
  const segments = targetPath.split("/").slice(1);
  if (
    !targetPath.startsWith("/") || CONTROL_REGEXP.test(targetPath) ||
    segments.some((s) => s === "" || s === "." || s === "..")
  ) {
    throw invalidArgument(
      `${field} "${targetPath}" must be an absolute path without ".", ".." or empty segments`,
    );
  }
  const parsed = parseTargetPath(kubeletRoot, targetPath);
  if (parsed === undefined) {
    throw invalidArgument(
      `${field} "${targetPath}" is not a kubelet CSI target path: expected ${kubeletRoot}/pods/<pod-uid>/volumes/kubernetes.io~csi/<pv-name>/mount (is --kubelet-path right?)`,
    );
  }
  return parsed;
}

/** Check the volume capability; returns whether its access mode is read-only. */
function checkCapability(cap: VolumeCapability | null | undefined): boolean {
  if (!cap) throw invalidArgument("Volume capability not provided");
  if (cap.block || cap.accessType === "block") {
    throw invalidArgument(
      "Block volumes are not supported: S3 buckets are mounted as file systems",
    );
  }
  const mode = cap.accessMode?.mode ?? "UNKNOWN";
  if (!SUPPORTED_ACCESS_MODES.includes(mode)) {
    throw invalidArgument(
      `Access mode ${mode} is not supported; use one of ${SUPPORTED_ACCESS_MODES.join(", ")}`,
    );
  }
  return READ_ONLY_MODES.includes(mode);
}

function mergeContextOption(
  options: MountOptions,
  name: "prefix" | "region",
  value: string | undefined,
): void {
  if (value === undefined || value === "") return;
  const fromOptions = options.get(name);
  if (fromOptions !== undefined && fromOptions !== value) {
    throw invalidArgument(
      fill(ATTRIBUTE_MESSAGES.conflict, { name, value, option: String(fromOptions) }),
    );
  }
  const parsed = parseMountOptions([`${name}=${value}`]);
  options.set(name, parsed.get(name)!);
}

/**
 * The connection keys of a node-publish Secret: `endpoint` (validated: http or https, a host, an
 * optional port, nothing else) and `region` (merged into the options like the `region` attribute:
 * set in two places, the values must agree). Returns the endpoint in normal form.
 * @throws {CsiError} InvalidArgument
 */
export function secretConnection(
  options: MountOptions,
  secrets: Readonly<Record<string, string>> | null | undefined,
): string | undefined {
  const raw = secrets?.[SECRET_KEYS.endpoint];
  let endpoint: string | undefined;
  if (raw !== undefined) {
    try {
      endpoint = parseS3Endpoint(raw);
    } catch (err) {
      if (!(err instanceof EndpointUrlError)) throw err;
      throw invalidArgument(`Node-publish Secret key "${SECRET_KEYS.endpoint}" ${err.message}`);
    }
  }
  const region = secrets?.[SECRET_KEYS.region]?.trim();
  if (region !== undefined) {
    let parsed: MountOptions;
    try {
      parsed = parseMountOptions([`region=${region}`]);
    } catch (err) {
      throw invalidArgument(
        `Node-publish Secret key "${SECRET_KEYS.region}" ("${
          region.slice(0, 40)
        }") is not a region name such as us-east-1`,
        { cause: err },
      );
    }
    const fromVolume = options.get("region");
    if (fromVolume !== undefined && fromVolume !== parsed.get("region")) {
      throw invalidArgument(
        `Node-publish Secret key "${SECRET_KEYS.region}" ("${region}") conflicts with the volume's region "${fromVolume}" (attribute or mount option); set it in one place`,
      );
    }
    options.set("region", parsed.get("region")!);
  }
  return endpoint;
}

/**
 * Combinations of options mount-s3 refuses (it exits at once, after the FUSE mount exists).
 * @throws {CsiError} InvalidArgument
 */
function checkCombinations(options: MountOptions, auth: string): void {
  const problem = combinationProblem(options, auth);
  if (problem !== undefined) throw invalidArgument(problem);
}

/**
 * The first combination of options (and authentication source) that the engine or the driver
 * refuses, or undefined; the admission policy checks the same, in the same order.
 */
export function combinationProblem(options: MountOptions, auth: string): string | undefined {
  const M = COMBINATION_MESSAGES;
  const key = options.get("sse-kms-key-id");
  const sse = options.get("sse");
  if (key !== undefined && sse !== "aws:kms" && sse !== "aws:kms:dsse") {
    const hasSse = sse === undefined ? "" : fill(M.kmsHasSse, { sse: String(sse) });
    return fill(M.kmsNeedsSse, { key: String(key), hasSse });
  }
  if (
    options.has("no-log") &&
    (options.has("debug") || options.has("debug-crt") || options.has("log-metrics"))
  ) {
    return M.noLog;
  }
  if (options.has("allow-other") && options.has("allow-root")) return M.allowOtherAndRoot;
  const interval = options.get("otlp-export-interval");
  if (interval !== undefined && !options.has("otlp-endpoint")) {
    return fill(M.otlpInterval, { interval: String(interval) });
  }
  if (options.has("no-sign-request") && auth === "secret") return M.unsignedSecret;
  return undefined;
}

/**
 * The volume's local cache: `--cache` at the Mountpoint Pod's cache volume and a
 * `--max-cache-size` within its limit. @throws {CsiError} InvalidArgument
 */
function applyCache(
  options: MountOptions,
  ctx: Readonly<Record<string, string>>,
  cacheSizeLimit: string,
): CacheConfig | undefined {
  let cache: CacheConfig | undefined;
  try {
    const pv = parseCacheConfig(ctx, options.has("cache"));
    // The controller gives the pod's cache volume this limit too (same function, same value).
    cache = pv && withDefaultSizeLimit(pv, cacheSizeLimit);
    const requested = options.get("max-cache-size");
    if (!cache) {
      if (requested !== undefined) {
        throw invalidArgument(
          fill(CACHE_MESSAGES.needsCache, {
            requested: String(requested),
            cache: CACHE_ATTRIBUTES.cache,
          }),
        );
      }
      return undefined;
    }
    const size = maxCacheSizeMiB(cache, requested === undefined ? undefined : Number(requested));
    if (size === undefined) options.delete("max-cache-size");
    else options.set("max-cache-size", String(size));
  } catch (err) {
    if (err instanceof CacheConfigError) throw invalidArgument(err.message);
    throw err;
  }
  options.set("cache", CACHE_DIR);
  return cache;
}

/**
 * Validate a NodePublishVolume request; a volume that names no engine gets `defaultEngine`.
 * @throws {CsiError} InvalidArgument with a message that names the field and what to fix
 */
export function validatePublish(
  req: NodePublishVolumeRequest,
  kubeletRoot: string,
  defaultEngine: Engine = DEFAULT_ENGINE,
  cacheSizeLimit: string = DEFAULT_CACHE_SIZE_LIMIT,
): PublishParams {
  const volumeId = checkVolumeId(req.volumeId);
  const { podUID, volumeName } = checkTargetPath(kubeletRoot, req.targetPath);
  const readOnlyMode = checkCapability(req.volumeCapability);
  const ctx = req.volumeContext ?? {};
  const contextUID = ctx[VOLUME_CONTEXT.podUID];
  if (contextUID && contextUID !== podUID) {
    throw invalidArgument(
      `Pod UID "${contextUID}" in the volume context does not match the target path's "${podUID}"`,
    );
  }
  const bucket = ctx[VOLUME_CONTEXT.bucketName];
  if (!bucket) throw invalidArgument(ATTRIBUTE_MESSAGES.bucketMissing);
  if (!BUCKET_REGEXP.test(bucket) || bucket.includes("..")) {
    throw invalidArgument(
      fill(ATTRIBUTE_MESSAGES.bucketInvalid, { bucket: firstChars(bucket, 80) }),
    );
  }
  const ephemeral = ctx[VOLUME_CONTEXT.ephemeral] === "true";
  const auth = ephemeral
    ? inlineAuthenticationSource(ctx[VOLUME_CONTEXT.authenticationSource])
    : ctx[VOLUME_CONTEXT.authenticationSource] || "driver";
  if (!(AUTHENTICATION_SOURCES as readonly string[]).includes(auth)) {
    throw invalidArgument(fill(ATTRIBUTE_MESSAGES.authUnknown, { auth }));
  }
  // Whether the pod's Secret arrived is checked with the credentials (credentials.ts).
  const inlineProblem = ephemeral ? inlineAuthenticationProblem(auth, true) : undefined;
  if (inlineProblem) throw invalidArgument(inlineProblem);
  const optionsAttribute = ctx[VOLUME_CONTEXT.mountOptions];
  if (!ephemeral && optionsAttribute !== undefined) {
    throw invalidArgument(
      fill(ATTRIBUTE_MESSAGES.mountOptionsAttribute, { name: VOLUME_CONTEXT.mountOptions }),
    );
  }
  const engine = ctx[VOLUME_CONTEXT.engine] || defaultEngine;
  if (!ENGINES.includes(engine as Engine)) {
    throw invalidArgument(
      fill(ATTRIBUTE_MESSAGES.engineUnknown, { engine, engines: ENGINES.join(", ") }),
    );
  }
  const mount = req.volumeCapability?.mount;
  const options = parseMountOptions([
    ...(mount?.mountFlags ?? []),
    ...splitMountOptions(optionsAttribute),
  ]);
  mergeContextOption(options, "prefix", ctx[VOLUME_CONTEXT.prefix]);
  mergeContextOption(options, "region", ctx[VOLUME_CONTEXT.region]);
  const endpoint = secretConnection(options, req.secrets);

  let fsGroup: number | undefined;
  const group = mount?.volumeMountGroup;
  if (group) {
    if (!/^\d{1,10}$/.test(group) || Number(group) > 2 ** 31 - 1) {
      throw invalidArgument(`Volume mount group "${group}" is not a numeric group id`);
    }
    if (Number(group) === 0) {
      throw invalidArgument(
        `Volume mount group "0" (the pod's fsGroup 0, root) cannot own the volume's files: mount-s3 refuses gid 0 as upstream does; give the pod a non-zero fsGroup, or none`,
      );
    }
    fsGroup = Number(group);
    const gid = options.get("gid");
    if (gid !== undefined && gid !== group) {
      throw invalidArgument(
        `Mount option "gid=${gid}" conflicts with the pod's fsGroup ${group}; remove one of them`,
      );
    }
    options.set("gid", group);
    if (!options.has("dir-mode")) options.set("dir-mode", FS_GROUP_DIR_MODE);
    if (!options.has("file-mode")) options.set("file-mode", FS_GROUP_FILE_MODE);
  }
  // An inline volume serves its pod alone: a read-only one is read-only at the source too.
  const readOnlyVolume = readOnlyMode || options.has("read-only") ||
    (ephemeral && req.readonly === true);
  if (readOnlyVolume) options.set("read-only", true);
  // The kernel mount always has allow_other (workloads run as any uid); permissions are then
  // checked by the kernel (default_permissions) against uid/gid/modes. The engine admits every
  // user (allow-other) unless the volume asks for allow-root: then only root and the Mountpoint
  // Pod's user, as upstream.
  checkCombinations(options, auth);
  if (!options.has("allow-root")) options.set("allow-other", true);
  options.set("force-path-style", true);
  const cache = applyCache(options, ctx, cacheSizeLimit);
  const problem = engineOptionsProblem(engine as Engine, options);
  if (problem) throw invalidArgument(problem);
  if (auth === "pod" && engine === "rclone") {
    throw invalidArgument(ATTRIBUTE_MESSAGES.podNeedsMountS3);
  }
  // What the mounter will check once the FUSE mount exists, checked now.
  for (const arg of renderArgs(options)) {
    const problem = mountArgProblem(arg);
    if (problem) throw invalidArgument(`Mount option ${problem}`);
  }
  return {
    volumeId,
    targetPath: req.targetPath!,
    podUID,
    volumeName,
    bucket,
    readOnlyVolume,
    readOnlyTarget: readOnlyVolume || req.readonly === true,
    authenticationSource: auth as AuthenticationSource,
    ephemeral,
    podIdentity: auth === "pod"
      ? {
        serviceAccountTokens: ctx[VOLUME_CONTEXT.serviceAccountTokens],
        serviceAccount: `${ctx[VOLUME_CONTEXT.podNamespace] ?? "?"}/${
          ctx[VOLUME_CONTEXT.serviceAccountName] || "default"
        }`,
      }
      : undefined,
    endpoint,
    engine: engine as Engine,
    cache,
    fsGroup,
    options,
  };
}
