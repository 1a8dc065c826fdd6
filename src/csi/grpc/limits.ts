/**
 * The resource limits of the gRPC server (`grpc_server.ts`, `http2_connection.ts`): their
 * defaults and the check every limit passes at construction. Each bounds what a local peer can make
 * the process hold; each default is far above what a legitimate CSI client needs (see ADR 0008,
 * "Limits"):
 *
 * - CSI requests are small: the largest legitimate ones carry a `secrets` map (a Kubernetes Secret
 *   is at most about 1 MiB) or the pod's service account tokens (a few KiB); csi-sanity's largest
 *   are 128-character names. gRPC's own default message limit is 4 MiB.
 * - The kubelet dials one connection per call (so about one connection per volume operation in
 *   flight, at most a few per pod on the node); csi-provisioner keeps one connection with up to
 *   its worker count of calls in flight (streams above our limit wait in the client).
 *
 * @module
 */

const KiB = 1024;
const MiB = 1024 * KiB;

/** The defaults (see each option's documentation in `grpc_server.ts` and `http2_connection.ts`). */
export const DEFAULT_LIMITS = {
  /** Largest request message (gRPC's default). */
  maxReceiveBytes: 4 * MiB,
  /** Streams open at once per connection, handlers still running included. */
  maxConcurrentStreams: 32,
  /** Largest request header list (RFC 7541 size). */
  maxHeaderListSize: 16 * KiB,
  /** Connections open at once per server. */
  maxConnections: 128,
  /**
   * Request bytes one connection may hold (header lists and bodies, until their handlers end,
   * plus the window it grants): room for one message of the largest size and headers of every
   * stream. Added to the largest body.
   */
  connectionBufferSlack: 1 * MiB,
  /** Request bytes the whole server may hold (at least twice one connection's limit). */
  maxServerBufferBytes: 16 * MiB,
  /** Time allowed for a request's headers and body to arrive, from its first HEADERS frame. */
  requestTimeoutMs: 10_000,
  /** Time allowed for the preface and the first SETTINGS. */
  handshakeTimeoutMs: 10_000,
} as const;

/** What a limit refused or cut (for logs: one kind flooding must not hide another). */
export type LimitKind =
  | "connection refused"
  | "idle connection closed"
  | "stream refused"
  | "request timeout"
  | "header block timeout"
  | "stream flow control";

/** A limit at work, reported by the server's `onLimit` option. */
export interface LimitEvent {
  readonly kind: LimitKind;
  readonly detail: string;
}

/**
 * `value` when it is a safe integer of at least `min`; a RangeError naming the option otherwise.
 * Every limit goes through this, so that no limit can be `NaN` (which no `>` check catches).
 */
export function checkLimit(owner: string, name: string, value: number, min = 0): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`${owner}: ${name} must be an integer of at least ${min}, not ${value}`);
  }
  return value;
}
