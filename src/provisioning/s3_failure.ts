/**
 * S3 failures of the Controller service as gRPC errors whose messages say what to fix: access
 * denied → PermissionDenied, bucket of another account → AlreadyExists, endpoint down → Unavailable,
 * invalid name → InvalidArgument, anything else → Internal (5xx → Unavailable, retried).
 *
 * @module
 */
import { Code, CsiError } from "../csi/errors.ts";
import { S3StoreError } from "../s3/bucket_store.ts";
import { errorMessage } from "../util/errors.ts";

/** What was being done, for the message. */
export interface FailureContext {
  /** e.g. `create bucket "x"`. */
  readonly action: string;
  /** `provisioner secret` or `driver credentials`. */
  readonly source: "driver" | "secret";
  /** The endpoint, for unreachable errors. */
  readonly endpoint: string | undefined;
}

/**
 * Whose keys, without naming them: the message reaches the PVC's ProvisioningFailed Event, which
 * every user of the namespace reads (the controller's log names the access key id).
 */
function who(ctx: FailureContext): string {
  return ctx.source === "secret" ? "keys of the provisioner secret" : "driver's credentials";
}

/** Map anything thrown by a store call to a {@link CsiError} (CsiErrors pass through). */
export function s3Failure(err: unknown, ctx: FailureContext): CsiError {
  if (err instanceof CsiError) return err;
  if (err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError")) {
    return new CsiError(
      Code.UNAVAILABLE,
      `S3 did not answer in time to ${ctx.action} (endpoint ${ctx.endpoint ?? "AWS"}); retrying`,
      { cause: err },
    );
  }
  if (!(err instanceof S3StoreError)) {
    return new CsiError(Code.INTERNAL, `Failed to ${ctx.action}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  const detail = errorMessage(err);
  switch (err.kind) {
    case "bad-credentials":
      return new CsiError(
        Code.PERMISSION_DENIED,
        `S3 rejected the ${who(ctx)} (${detail}) while trying to ${ctx.action}: fix the keys`,
        { cause: err },
      );
    case "access-denied":
      return new CsiError(
        Code.PERMISSION_DENIED,
        `S3 denied the ${
          who(ctx)
        } permission to ${ctx.action} (${detail}): grant it, or use credentials that have it`,
        { cause: err },
      );
    case "bucket-taken":
      return new CsiError(
        Code.ALREADY_EXISTS,
        `Cannot ${ctx.action}: the name is taken by another S3 account (${detail}). Choose another bucketNamePrefix in the StorageClass`,
        { cause: err },
      );
    case "invalid-bucket-name":
      return new CsiError(
        Code.INVALID_ARGUMENT,
        `S3 refused to ${ctx.action}: invalid bucket name (${detail})`,
        { cause: err },
      );
    case "invalid-region":
      return new CsiError(
        Code.INVALID_ARGUMENT,
        `S3 refused to ${ctx.action}: the region is not a location this S3 service knows (${detail}). Set the StorageClass parameter region (or --s3-region) to one it serves, e.g. the RGW zonegroup name`,
        { cause: err },
      );
    case "unreachable":
      return new CsiError(
        Code.UNAVAILABLE,
        `S3 endpoint ${
          ctx.endpoint ?? "(AWS)"
        } is unreachable while trying to ${ctx.action} (${detail}): check --s3-endpoint-url / AWS_ENDPOINT_URL, the CA bundle, the proxy and the network`,
        { cause: err },
      );
    case "not-empty":
      return new CsiError(
        Code.FAILED_PRECONDITION,
        `Cannot ${ctx.action}: the bucket is not empty`,
        { cause: err },
      );
    case "no-such-bucket":
      return new CsiError(
        Code.NOT_FOUND,
        `Cannot ${ctx.action}: no such bucket (${detail})`,
        { cause: err },
      );
    default:
      return new CsiError(
        err.status !== undefined && err.status >= 500 ? Code.UNAVAILABLE : Code.INTERNAL,
        `S3 failed to ${ctx.action}: ${detail}`,
        { cause: err },
      );
  }
}
