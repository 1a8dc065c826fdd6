/**
 * CSI Node service. This first version answers NodeGetInfo and NodeGetCapabilities; publishing
 * (issue #6) adds NodePublishVolume, NodeUnpublishVolume and NodeGetVolumeStats. Methods that are
 * not defined here answer UNIMPLEMENTED through the server.
 *
 * @module
 */
import type {
  NodeGetCapabilitiesResponse,
  NodeGetInfoResponse,
  NodeHandlers,
} from "../csi/gen/csi_types.ts";

/** Options of {@link NodeService}. */
export interface NodeServiceOptions {
  /** This node's name (`--node-id`). */
  readonly nodeId: string;
}

/** The CSI Node service of the node plugin. */
export class NodeService implements Partial<NodeHandlers> {
  readonly #options: NodeServiceOptions;

  /** Create the service. */
  constructor(options: NodeServiceOptions) {
    this.#options = options;
  }

  /** The node id; no topology and no volume limit (S3 volumes are not attached). */
  nodeGetInfo(): Promise<NodeGetInfoResponse> {
    return Promise.resolve({ nodeId: this.#options.nodeId });
  }

  /** Capabilities offered by this build. */
  nodeGetCapabilities(): Promise<NodeGetCapabilitiesResponse> {
    return Promise.resolve({ capabilities: [] });
  }
}
