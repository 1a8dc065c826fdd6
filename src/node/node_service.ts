/**
 * CSI Node service: NodeGetInfo, NodeGetCapabilities (VOLUME_MOUNT_GROUP, GET_VOLUME_STATS,
 * VOLUME_CONDITION), NodePublishVolume, NodeUnpublishVolume and NodeGetVolumeStats. Requests are
 * validated first (`publish_request.ts`); the mount work is done by {@link Publisher}. No
 * staging: S3 buckets need no per-node device step.
 *
 * @module
 */
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
import { codeName, CsiError } from "../csi/errors.ts";
import type { Files } from "../sys/files.ts";
import type { Sys } from "../sys/sys.ts";
import { logger } from "../util/log.ts";
import { NO_METRICS, type NodeMetrics } from "./metrics.ts";
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

/** Options of {@link NodeService}. */
export interface NodeServiceOptions {
  /** This node's name (`--node-id`). */
  readonly nodeId: string;
  /** Kubelet root dir. */
  readonly kubeletRoot?: string;
  /** Mount work; publish RPCs answer Unavailable without it. */
  readonly publisher?: Publisher;
  readonly sys?: Sys;
  readonly files?: Files;
  readonly pods?: MountpointPods;
  readonly metrics?: NodeMetrics;
  /** Health-check stat timeout. @default 3000 */
  readonly healthMs?: number;
}

const log = logger("node", "service");

function resultOf(err: unknown): string {
  return err instanceof CsiError ? codeName(err.code) : "INTERNAL";
}

/** The CSI Node service of the node plugin. */
export class NodeService implements Partial<NodeHandlers> {
  readonly #o: NodeServiceOptions;

  /** Create the service. */
  constructor(options: NodeServiceOptions) {
    this.#o = options;
  }

  /** The node id; no topology and no volume limit (S3 volumes are not attached). */
  nodeGetInfo(): Promise<NodeGetInfoResponse> {
    return Promise.resolve({ nodeId: this.#o.nodeId });
  }

  /** Capabilities offered by this build. */
  nodeGetCapabilities(): Promise<NodeGetCapabilitiesResponse> {
    return Promise.resolve({
      capabilities: NODE_CAPABILITIES.map((type) => ({ type: "rpc" as const, rpc: { type } })),
    });
  }

  #deps() {
    const { publisher, sys, files, pods, kubeletRoot } = this.#o;
    if (!publisher || !sys || !files || !pods || !kubeletRoot) {
      throw new Error("NodeService was created without its mount dependencies");
    }
    return { publisher, sys, files, pods, kubeletRoot };
  }

  /** Mount the bucket on the target path (see `publisher.ts`). */
  async nodePublishVolume(req: NodePublishVolumeRequest): Promise<NodePublishVolumeResponse> {
    const t0 = performance.now();
    const metrics = this.#o.metrics ?? NO_METRICS;
    try {
      const { publisher, kubeletRoot } = this.#deps();
      const params = validatePublish(req, kubeletRoot);
      const outcome = await publisher.publish(params, req.secrets);
      log.info("Published volume {volumeId} on {target} ({outcome})", {
        volumeId: params.volumeId,
        target: params.targetPath,
        outcome,
        ms: Math.round(performance.now() - t0),
      });
      metrics.observePublish("OK", (performance.now() - t0) / 1000);
      return {};
    } catch (err) {
      metrics.observePublish(resultOf(err), (performance.now() - t0) / 1000);
      throw err;
    }
  }

  /** Unmount and remove the target; idempotent. */
  async nodeUnpublishVolume(req: NodeUnpublishVolumeRequest): Promise<NodeUnpublishVolumeResponse> {
    const t0 = performance.now();
    const metrics = this.#o.metrics ?? NO_METRICS;
    try {
      const { publisher, kubeletRoot } = this.#deps();
      const volumeId = checkVolumeId(req.volumeId);
      checkTargetPath(kubeletRoot, req.targetPath);
      const result = await publisher.unpublish(req.targetPath!);
      log.info("Unpublished volume {volumeId} from {target} ({result})", {
        volumeId,
        target: req.targetPath,
        result,
      });
      metrics.observeUnpublish("OK", (performance.now() - t0) / 1000);
      return {};
    } catch (err) {
      metrics.observeUnpublish(resultOf(err), (performance.now() - t0) / 1000);
      throw err;
    }
  }

  /** Health of a published volume (`VolumeCondition`). */
  nodeGetVolumeStats(req: NodeGetVolumeStatsRequest): Promise<NodeGetVolumeStatsResponse> {
    const { sys, files, pods, kubeletRoot } = this.#deps();
    checkVolumeId(req.volumeId);
    checkTargetPath(kubeletRoot, req.volumePath, "Volume path");
    return volumeStats(
      { sys, files, pods, kubeletRoot, healthMs: this.#o.healthMs ?? 3000 },
      req.volumePath!,
    );
  }
}
