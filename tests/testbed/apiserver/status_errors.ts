/**
 * Kubernetes `Status` error bodies. Every failure inside the emulator is an {@link ApiError}; the
 * router turns it into `{"kind":"Status",…,"code":N}` with the same HTTP status, which is what
 * kubectl and client-node parse ("Response Status Kind" in the Kubernetes API conventions,
 * `contributors/devel/sig-architecture/api-conventions.md` in `github.com/kubernetes/community`).
 *
 * @module
 */

/** One entry of `details.causes`. */
export interface StatusCause {
  /** Machine-readable reason, e.g. `FieldValueRequired`. */
  readonly reason: string;
  /** Human text, e.g. `Required value`. */
  readonly message: string;
  /** Field path, e.g. `spec.nodeName`. */
  readonly field?: string;
}

/** `details` of a Status. */
export interface StatusDetails {
  /** Object name. */
  readonly name?: string;
  /** API group (custom resources only). */
  readonly group?: string;
  /** Plural resource (for NotFound/AlreadyExists/Conflict) or kind (for Invalid). */
  readonly kind?: string;
  /** Object uid (delete success). */
  readonly uid?: string;
  /** Per-field causes. */
  readonly causes?: readonly StatusCause[];
  /** Suggested retry delay. */
  readonly retryAfterSeconds?: number;
}

/** A request failure with its HTTP code, Status reason and details. */
export class ApiError extends Error {
  /** Error name. */
  override name = "ApiError";
  /** Create an error answered with HTTP `code` and Status `reason`. */
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
  ) {
    super(message);
  }

  /** The Status object sent to the client. */
  toStatus(): Record<string, unknown> {
    return statusBody(this.code, this.reason, this.message, this.details);
  }
}

/** Build a Failure `Status` object. `reason` is omitted when empty (as for HTTP 500s). */
export function statusBody(
  code: number,
  reason: string,
  message: string,
  details?: StatusDetails,
): Record<string, unknown> {
  const body: Record<string, unknown> = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
  };
  if (reason) body.reason = reason;
  if (details) body.details = details;
  body.code = code;
  return body;
}

/** Identifies an object in error messages: plural resource, optional group, name. */
export interface ObjectRef {
  /** Plural resource name. */
  readonly resource: string;
  /** API group ("" for core). */
  readonly group: string;
  /** Object name. */
  readonly name: string;
}

function qualified(ref: ObjectRef): string {
  return ref.group ? `${ref.resource}.${ref.group}` : ref.resource;
}

function refDetails(ref: ObjectRef): StatusDetails {
  return ref.group
    ? { name: ref.name, group: ref.group, kind: ref.resource }
    : { name: ref.name, kind: ref.resource };
}

/** 404 `<resource> "<name>" not found`. */
export function notFound(ref: ObjectRef): ApiError {
  return new ApiError(
    404,
    "NotFound",
    `${qualified(ref)} "${ref.name}" not found`,
    refDetails(ref),
  );
}

/** 404 for an unknown URL. */
export function pathNotFound(): ApiError {
  return new ApiError(404, "NotFound", "the server could not find the requested resource", {});
}

/** 409 `<resource> "<name>" already exists`. */
export function alreadyExists(ref: ObjectRef): ApiError {
  return new ApiError(
    409,
    "AlreadyExists",
    `${qualified(ref)} "${ref.name}" already exists`,
    refDetails(ref),
  );
}

/** 409 for a stale `metadata.resourceVersion`. */
export function conflict(ref: ObjectRef, why?: string): ApiError {
  const tail = why ??
    "the object has been modified; please apply your changes to the latest version and try again";
  return new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(ref)} "${ref.name}": ${tail}`,
    refDetails(ref),
  );
}

/** 400 BadRequest. */
export function badRequest(message: string): ApiError {
  return new ApiError(400, "BadRequest", message);
}

/** 403 Forbidden. */
export function forbidden(message: string, details?: StatusDetails): ApiError {
  return new ApiError(403, "Forbidden", message, details);
}

/** 405 MethodNotAllowed. */
export function methodNotAllowed(message: string): ApiError {
  return new ApiError(405, "MethodNotAllowed", message, {});
}

/** 410 Expired. */
export function expired(message: string): ApiError {
  return new ApiError(410, "Expired", message);
}

/** 415 UnsupportedMediaType. */
export function unsupportedMediaType(message: string): ApiError {
  return new ApiError(415, "UnsupportedMediaType", message, {});
}

/**
 * 422 Invalid, message rebuilt from the causes the way the real server does:
 * `<Kind>[.<group>] "<name>" is invalid: [a: x, b: y]` (brackets only for several causes).
 */
export function invalid(
  kind: string,
  group: string,
  name: string,
  causes: readonly StatusCause[],
): ApiError {
  const parts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const list = parts.length === 1 ? parts[0]! : `[${parts.join(", ")}]`;
  const qualifiedKind = group ? `${kind}.${group}` : kind;
  const details: StatusDetails = group ? { name, group, kind, causes } : { name, kind, causes };
  return new ApiError(422, "Invalid", `${qualifiedKind} "${name}" is invalid: ${list}`, details);
}

/** 500 InternalError. */
export function internalError(message: string): ApiError {
  return new ApiError(500, "InternalError", message, { causes: [{ reason: "", message }] });
}
