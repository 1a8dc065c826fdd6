/**
 * Typed errors of the Kubernetes API boundary. Callers branch with `instanceof`; the message keeps
 * the API server's own text (reason and message of the `Status` body).
 *
 * @module
 */

/** Any non-2xx answer of the API server. */
export class ApiError extends Error {
  override name = "ApiError";
  /** Create an error from an HTTP status and the `Status` body's reason. */
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** 404: the object (or its namespace) does not exist. */
export class NotFoundError extends ApiError {
  override name = "NotFoundError";
}

/** 409 Conflict on a stale `resourceVersion` (optimistic concurrency lost). */
export class ConflictError extends ApiError {
  override name = "ConflictError";
}

/** 409 AlreadyExists on create. */
export class AlreadyExistsError extends ApiError {
  override name = "AlreadyExistsError";
}

/** 410 Gone: the requested resourceVersion is too old; re-list. */
export class GoneError extends ApiError {
  override name = "GoneError";
}

/** Build the right subclass from a response status and `Status` body. */
export function apiErrorFrom(status: number, body: unknown, what: string): ApiError {
  const s = (body ?? {}) as { reason?: string; message?: string };
  const reason = s.reason ?? "";
  const message = `${what}: ${s.message ?? `HTTP ${status}`}`;
  if (status === 404) return new NotFoundError(status, reason || "NotFound", message);
  if (status === 409 && reason === "AlreadyExists") {
    return new AlreadyExistsError(status, reason, message);
  }
  if (status === 409) return new ConflictError(status, reason || "Conflict", message);
  if (status === 410) return new GoneError(status, reason || "Expired", message);
  return new ApiError(status, reason, message);
}

/**
 * A request got no complete answer within its deadline (the connection may hang). Nothing is
 * known about whether a write took effect.
 */
export class RequestTimeoutError extends ApiError {
  override name = "RequestTimeoutError";
  /** Create for `what`, given up after `ms` milliseconds. */
  constructor(what: string, readonly ms: number, options?: ErrorOptions) {
    super(0, "Timeout", `${what}: no answer within ${ms} ms`, options);
  }
}

/**
 * A write was refused before it was sent because this process no longer holds a valid lease
 * (leader election): it must not act any more.
 */
export class NotLeaderError extends Error {
  override name = "NotLeaderError";
}
