/**
 * Typed CSI errors carrying a gRPC status code. Handlers throw these; the server turns them into
 * gRPC statuses. Anything else that escapes a handler becomes `INTERNAL` (a bug).
 *
 * Messages follow the project style: sentence case, quoted values, and the next step when the
 * operator can act on it — kubelet shows them verbatim in the workload Pod's events.
 *
 * @module
 */
import { status } from "@grpc/grpc-js";

/** gRPC status codes used by CSI (re-exported so callers need not import grpc-js). */
export const Code = status;
/** A gRPC status code number. */
export type Code = status;

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

/** Map anything thrown by a handler to a `{ code, message }` pair for the wire. */
export function toStatus(err: unknown): { code: Code; message: string } {
  if (err instanceof CsiError) return { code: err.code, message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  return { code: Code.INTERNAL, message: `Internal error: ${message}` };
}

/** The upper-case name of a gRPC code, e.g. `INVALID_ARGUMENT`, for logs and metrics. */
export function codeName(code: Code): string {
  return Code[code] ?? `CODE_${code}`;
}
