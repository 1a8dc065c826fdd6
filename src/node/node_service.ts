/**
 * CSI Node service: NodeGetInfo, NodeGetCapabilities (VOLUME_MOUNT_GROUP, GET_VOLUME_STATS,
 * VOLUME_CONDITION), NodePublishVolume, NodeUnpublishVolume and NodeGetVolumeStats. Requests are
 * validated completely first (`publish_request.ts`: nothing is touched for a bad request); the
 * mount work is done by {@link Publisher}, under the call's {@link CallContext} (its signal stops
 * every wait at the kubelet's deadline). No staging: S3 buckets need no per-node device step.
 *
 * Unpublish, stats and the publish of an already mounted target need no Kubernetes API: they work
 * while the API server is down.
 *
 * @module
 */
import type { CallContext } from "../csi/call_context.ts";
import type {
  NodeGetCapabilitiesResponse,
  NodeGetInfoResponse,
  NodeGetVolumeStatsRequest,
  NodeGetVolumeStatsResponse,
  NodeHandlers,
  NodePublishVolumeRequest,
  NodePublishVolumeResponse,
  NodeServiceCapability_RPC_Type,
  NodeUnpublishVolumeRequest,
  NodeUnpublishVolumeResponse,
} from "../csi/gen/csi_types.ts";
import { Code, codeName, CsiError, invalidArgument, notFound } from "../csi/errors.ts";
import type { Files } from "../sys/files.ts";
import type { Sys } from "../sys/sys.ts";
import type { Engine } from "../mppod/mount_message.ts";
import { logger } from "../util/log.ts";
import type { HealthChecker } from "./health.ts";
import type { NodeMetrics } from "./metrics.ts";
import type { MountpointPods } from "./mountpoint_pods.ts";
import { checkTargetPath, checkVolumeId, validatePublish } from "./publish_request.ts";
import type { Publisher } from "./publisher.ts";
import { volumeStats } from "./volume_stats.ts";

/** Capabilities this node service offers. */
export const NODE_CAPABILITIES: readonly NodeServiceCapability_RPC_Type[] = [
  "VOLUME_MOUNT_GROUP",
  "GET_VOLUME_STATS",
  "VOLUME_CONDITION",
];

/** What {@link NodeService} needs; all of it. */
export interface NodeServiceDeps {
  /** This node's name (`--node-id`). */
  readonly nodeId: string;
  /** Kubelet root dir. */
  readonly kubeletRoot: string;
  /** Engine of volumes that name none. @default DEFAULT_ENGINE */
  readonly defaultEngine?: Engine;
  /**
   * Size limit of a disk emptyDir cache whose PV names none (the controller's
   * `--mountpoint-cache-size-limit`). @default DEFAULT_CACHE_SIZE_LIMIT
   */
  readonly cacheSizeLimit?: string;
  /** Publish and unpublish work. */
  readonly publisher: Publisher;
  readonly sys: Sys;
  readonly files: Files;
  readonly pods: MountpointPods;
  /** Health checks of mounts (shared, bounded). */
  readonly health: HealthChecker;
  readonly metrics: NodeMetrics;
}

const log = logger("node", "service");

function resultOf(err: unknown, context?: CallContext): string {
  if (err instanceof CsiError) return codeName(err.code);
  if (context?.signal.aborted) return "CANCELLED";
  return "INTERNAL";
}

/** The CSI Node service of the node plugin. */
export class NodeService implements Partial<NodeHandlers> {
  readonly #d: NodeServiceDeps;

  /** Create the service. */
  constructor(deps: NodeServiceDeps) {
    this.#d = deps;
  }

  /** The node id; no topology and no volume limit (S3 volumes are not attached). */
  nodeGetInfo(): Promise<NodeGetInfoResponse> {
    return Promise.resolve({ nodeId: this.#d.nodeId });
  }

  /** Capabilities offered by this build. */
  nodeGetCapabilities(): Promise<NodeGetCapabilitiesResponse> {
    return Promise.resolve({
      capabilities: NODE_CAPABILITIES.map((type) => ({ type: "rpc" as const, rpc: { type } })),
    });
  }

  /** Mount the bucket on the target path (see `publisher.ts`). */
  async nodePublishVolume(
    req: NodePublishVolumeRequest,
    context?: CallContext,
  ): Promise<NodePublishVolumeResponse> {
    const t0 = performance.now();
    const { publisher, kubeletRoot, metrics } = this.#d;
    try {
      const params = validatePublish(
        req,
        kubeletRoot,
        this.#d.defaultEngine,
        this.#d.cacheSizeLimit,
      );
      const outcome = await publisher.publish(params, req.secrets, context?.signal);
      log.info("Published volume {volumeId} on {target} ({outcome})", {
        volumeId: params.volumeId,
        target: params.targetPath,
        outcome,
        ms: Math.round(performance.now() - t0),
      });
      metrics.observePublish("OK", (performance.now() - t0) / 1000);
      return {};
    } catch (err) {
      metrics.observePublish(resultOf(err, context), (performance.now() - t0) / 1000);
      throw err;
    }
  }

  /** Unmount and remove the target; idempotent; needs no Kubernetes API. */
  async nodeUnpublishVolume(
    req: NodeUnpublishVolumeRequest,
    context?: CallContext,
  ): Promise<NodeUnpublishVolumeResponse> {
    const t0 = performance.now();
    const { publisher, kubeletRoot, metrics } = this.#d;
    try {
      const volumeId = checkVolumeId(req.volumeId);
      checkTargetPath(kubeletRoot, req.targetPath);
      const result = await publisher.unpublish(req.targetPath!, context?.signal);
      log.info("Unpublished volume {volumeId} from {target} ({result})", {
        volumeId,
        target: req.targetPath,
        result,
      });
      metrics.observeUnpublish("OK", (performance.now() - t0) / 1000);
      return {};
    } catch (err) {
      metrics.observeUnpublish(resultOf(err, context), (performance.now() - t0) / 1000);
      throw err;
    }
  }

  /**
   * Health of a published volume (`VolumeCondition`). A missing volume id or path is
   * InvalidArgument; a path where kubelet never publishes a volume of ours is NotFound, like a
   * target that is not mounted.
   */
  async nodeGetVolumeStats(
    req: NodeGetVolumeStatsRequest,
    context?: CallContext,
  ): Promise<NodeGetVolumeStatsResponse> {
    const { sys, files, pods, health, kubeletRoot } = this.#d;
    checkVolumeId(req.volumeId);
    if (!req.volumePath) throw invalidArgument("Volume path not provided");
    try {
      checkTargetPath(kubeletRoot, req.volumePath, "Volume path");
    } catch (err) {
      if (!(err instanceof CsiError) || err.code !== Code.INVALID_ARGUMENT) throw err;
      throw notFound(`${err.message}; no volume of this driver is published there`);
    }
    return await volumeStats(
      { sys, files, pods, health, kubeletRoot },
      req.volumePath!,
      context?.signal,
    );
  }
}
