/**
 * What a CSI handler knows about the call it serves, besides the request: a signal that aborts
 * when the caller's deadline passes, the caller cancels or goes away, so every wait of the handler
 * can stop at once (see `grpc/grpc_server.ts`).
 *
 * @module
 */

/** The call context passed as the second argument of every CSI handler. */
export interface CallContext {
  /** Aborts at the caller's deadline, on cancel and when the connection ends. */
  readonly signal: AbortSignal;
  /** The caller's deadline on the `performance.now()` clock, when it sent one. */
  readonly deadline?: number | undefined;
}
