/**
 * Typed CSI errors carrying a gRPC status code. Handlers throw these; the server turns them into
 * gRPC statuses. Anything else that escapes a handler becomes `INTERNAL` (a bug).
 *
 * Messages follow the project style: sentence case, quoted values, and the next step when the
 * operator can act on it — kubelet shows them verbatim in the workload Pod's events.
 *
 * @module
 */
import { redactUrlCredentials } from "../util/redact.ts";

/**
 * gRPC status codes (the numbers are fixed by the gRPC protocol). Defined here rather than imported
 * from grpc-js so that pure code and its unit tests do not load the gRPC runtime.
 */
export enum Code {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
}

/** An error with a gRPC status code. */
export class CsiError extends Error {
  override name = "CsiError";
  /** Create an error with `code` and a message for the caller. */
  constructor(readonly code: Code, message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** InvalidArgument: the request itself is wrong; retrying it unchanged will not help. */
export function invalidArgument(message: string, options?: ErrorOptions): CsiError {
  return new CsiError(Code.INVALID_ARGUMENT, message, options);
}

/** NotFound: the named volume or object does not exist. */
export function notFound(message: string, options?: ErrorOptions): CsiError {
  return new CsiError(Code.NOT_FOUND, message, options);
}

/** FailedPrecondition: the system is not in a state where the call can succeed yet. */
export function failedPrecondition(message: string, options?: ErrorOptions): CsiError {
  return new CsiError(Code.FAILED_PRECONDITION, message, options);
}

/** Unimplemented: the RPC is not offered by this plugin. */
export function unimplemented(method: string): CsiError {
  return new CsiError(Code.UNIMPLEMENTED, `${method} is not implemented by this plugin`);
}

/** Internal: a bug or an unexpected condition. */
export function internal(message: string, options?: ErrorOptions): CsiError {
  return new CsiError(Code.INTERNAL, message, options);
}

/** DeadlineExceeded: the call's deadline passed before the work finished. */
export function deadlineExceeded(message: string, options?: ErrorOptions): CsiError {
  return new CsiError(Code.DEADLINE_EXCEEDED, message, options);
}

/** Unavailable: a dependency (API server, Mountpoint Pod, S3) cannot be reached now; retry. */
export function unavailable(message: string, options?: ErrorOptions): CsiError {
  return new CsiError(Code.UNAVAILABLE, message, options);
}

/**
 * Map anything thrown by a handler to a `{ code, message }` pair for the wire. A {@link CsiError}
 * keeps its code. When the call's `signal` has aborted, whatever the handler threw because of it
 * is DEADLINE_EXCEEDED (deadline passed) or CANCELLED (caller gone); a bounded wait that ran out
 * (`TimeoutError`) is DEADLINE_EXCEEDED; anything else is INTERNAL (a bug).
 */
export function toStatus(err: unknown, signal?: AbortSignal): { code: Code; message: string } {
  const status = statusOf(err, signal);
  // The message becomes the caller's error and an Event: no URL credentials (a proxy's) in it.
  return { code: status.code, message: redactUrlCredentials(status.message) };
}

function statusOf(err: unknown, signal?: AbortSignal): { code: Code; message: string } {
  if (err instanceof CsiError) return { code: err.code, message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  if (signal?.aborted) {
    const reason = signal.reason;
    const deadline = reason instanceof Error && reason.name === "DeadlineExceededError";
    return {
      code: deadline ? Code.DEADLINE_EXCEEDED : Code.CANCELLED,
      message: reason instanceof Error ? reason.message : message,
    };
  }
  if (err instanceof Error && err.name === "TimeoutError") {
    return { code: Code.DEADLINE_EXCEEDED, message };
  }
  return { code: Code.INTERNAL, message: `Internal error: ${message}` };
}

/** The upper-case name of a gRPC code, e.g. `INVALID_ARGUMENT`, for logs and metrics. */
export function codeName(code: Code): string {
  return Code[code] ?? `CODE_${code}`;
}
