/**
 * How kubelet talks to a CSI node plugin: a **new connection for every RPC** (closed afterwards),
 * uncached NodeGetCapabilities checks, one shared deadline per operation, and kubelet's error
 * classification (final vs uncertain) and error text (`rpc error: code = X desc = …`).
 *
 * @module
 */
import { connectCsi } from "../../../src/csi/client.ts";
import type {
  NodeGetInfoResponse,
  NodeGetVolumeStatsResponse,
  NodePublishVolumeRequest,
  NodeServiceCapability_RPC_Type,
  NodeUnpublishVolumeRequest,
} from "../../../src/csi/gen/csi_types.ts";

/** Go names of gRPC codes, as `status.Error` prints them. */
const GO_CODE_NAMES = [
  "OK",
  "Canceled",
  "Unknown",
  "InvalidArgument",
  "DeadlineExceeded",
  "NotFound",
  "AlreadyExists",
  "PermissionDenied",
  "ResourceExhausted",
  "FailedPrecondition",
  "Aborted",
  "OutOfRange",
  "Unimplemented",
  "Internal",
  "Unavailable",
  "DataLoss",
  "Unauthenticated",
];

/** Codes kubelet treats as "uncertain" (`isFinalError` false): the mount may exist. */
const NON_FINAL_CODES = new Set([1, 4, 8, 10, 14]);

/** gRPC code of an error thrown by the CSI client, or undefined for a non-gRPC error. */
export function grpcCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}

/** True when kubelet would treat the error as final (the volume is certainly not mounted). */
export function isFinalError(err: unknown): boolean {
  const code = grpcCode(err);
  return code !== undefined && !NON_FINAL_CODES.has(code);
}

/** The error as Go's grpc `status.Error` formats it: `rpc error: code = Internal desc = …`. */
export function kubeletErrorText(err: unknown): string {
  const code = grpcCode(err);
  const e = err as { details?: string; message?: string } | undefined;
  if (code !== undefined) {
    return `rpc error: code = ${GO_CODE_NAMES[code] ?? `Code(${code})`} desc = ${
      e?.details ?? e?.message ?? ""
    }`;
  }
  return e?.message ?? String(err);
}

/** One operation's calls to the plugin, all bounded by the same deadline. */
export class CsiNodeCalls {
  readonly #socketPath: string;
  readonly #deadline: number;
  readonly #signal: AbortSignal | undefined;

  /**
   * Calls to the plugin at `socketPath`, all ending by `Date.now() + timeoutMs`. When `signal`
   * aborts (kubelet shutdown), in-flight calls are cancelled by closing their connection.
   */
  constructor(socketPath: string, timeoutMs: number, signal?: AbortSignal) {
    this.#socketPath = socketPath;
    this.#deadline = Date.now() + timeoutMs;
    this.#signal = signal;
  }

  async #call<T>(fn: (c: ReturnType<typeof connectCsi>) => Promise<T>): Promise<T> {
    this.#signal?.throwIfAborted();
    const remaining = Math.max(1, this.#deadline - Date.now());
    const client = connectCsi(this.#socketPath, { timeoutMs: remaining });
    let onAbort: (() => void) | undefined;
    const cancelled = new Promise<never>((_, reject) => {
      onAbort = () => reject(this.#signal?.reason ?? new Error("cancelled"));
      this.#signal?.addEventListener("abort", onAbort, { once: true });
    });
    try {
      return await Promise.race([fn(client), cancelled]);
    } finally {
      if (onAbort) this.#signal?.removeEventListener("abort", onAbort);
      client.close();
    }
  }

  /** `nodeSupportsCapability`: one NodeGetCapabilities RPC per check. */
  supports(cap: NodeServiceCapability_RPC_Type): Promise<boolean> {
    return this.#call(async (c) => {
      const res = await c.node.nodeGetCapabilities({});
      return (res.capabilities ?? []).some((x) => x.rpc?.type === cap);
    });
  }

  /** NodePublishVolume. */
  publish(req: NodePublishVolumeRequest): Promise<void> {
    return this.#call(async (c) => {
      await c.node.nodePublishVolume(req);
    });
  }

  /** NodeUnpublishVolume. */
  unpublish(req: NodeUnpublishVolumeRequest): Promise<void> {
    return this.#call(async (c) => {
      await c.node.nodeUnpublishVolume(req);
    });
  }

  /** NodeGetVolumeStats (volume_path is the target path; never a staging path). */
  stats(volumeId: string, volumePath: string): Promise<NodeGetVolumeStatsResponse> {
    return this.#call((c) => c.node.nodeGetVolumeStats({ volumeId, volumePath }));
  }

  /** NodeGetInfo (registration only). */
  info(): Promise<NodeGetInfoResponse> {
    return this.#call((c) => c.node.nodeGetInfo({}));
  }
}
