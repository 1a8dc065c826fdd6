/**
 * Pod-level identity (`authenticationSource: pod`): the Mountpoint Pod reads S3 with temporary
 * credentials of a role, obtained for the workload's ServiceAccount — never with the driver's
 * keys.
 *
 * kubelet puts a projected token of the workload's ServiceAccount in the NodePublishVolume volume
 * context (`csi.storage.k8s.io/serviceAccount.tokens`, for the CSIDriver's `tokenRequests`
 * audience) at every publish and republish (`requiresRepublish`); the node plugin exchanges it
 * with STS `AssumeRoleWithWebIdentity` for the role the controller put in the S3PA (the volume's
 * `roleArn`, else the ServiceAccount's annotation) and writes the credentials into the Mountpoint
 * Pod's credentials dir like any others. A republish renews them once less than `renewBeforeMs`
 * of their lifetime is left; mount-s3 reads the credentials file again at least every 15
 * minutes, so the mount keeps working across renewals without being remounted.
 *
 * @module
 */
import { CsiError, failedPrecondition, unavailable } from "../csi/errors.ts";
import { Code } from "../csi/errors.ts";
import { VOLUME_CONTEXT } from "../csi/volume_context.ts";
import { awsStsEndpoint, sessionName, type StsClient, StsError } from "../s3/sts.ts";
import type { S3Credentials } from "./credentials.ts";

/** Settings of {@link PodIdentity}. */
export interface PodIdentityOptions {
  readonly sts: StsClient;
  /** Audience of the CSIDriver's `tokenRequests` whose token is exchanged. */
  readonly audience: string;
  /** STS endpoint; undefined: the volume's S3 endpoint, else AWS STS of the region. */
  readonly stsEndpoint: string | undefined;
  /** Lifetime asked for the credentials. */
  readonly sessionSeconds: number;
  /** A republish renews credentials with less than this left. */
  readonly renewBeforeMs: number;
  /** Deadline of one STS call. */
  readonly timeoutMs: number;
  /** @default Date.now */
  readonly now?: () => number;
}

/** The workload whose identity is used. */
export interface WorkloadIdentity {
  /** The volume context's `csi.storage.k8s.io/serviceAccount.tokens` (JSON). */
  readonly tokens: string | undefined;
  /** Workload pod UID (the STS session name). */
  readonly podUID: string;
  /** `namespace/name` of its ServiceAccount, for messages. */
  readonly serviceAccount: string;
  /** Role to assume (from the S3PA). */
  readonly roleArn: string | undefined;
  /** The volume's S3 endpoint (its Secret's, else the driver's). */
  readonly s3Endpoint: string | undefined;
  /** Region, for AWS STS. */
  readonly region: string;
}

/**
 * The token for `audience` in kubelet's `serviceAccount.tokens` JSON.
 * @throws {CsiError} FailedPrecondition when there is none (the CSIDriver lacks tokenRequests)
 */
export function webIdentityToken(tokens: string | undefined, audience: string): string {
  let parsed: unknown;
  try {
    parsed = tokens === undefined ? undefined : JSON.parse(tokens);
  } catch {
    parsed = undefined;
  }
  const entry = (parsed as Record<string, { token?: unknown }> | undefined)?.[audience];
  if (typeof entry?.token !== "string" || entry.token === "") {
    throw failedPrecondition(
      `kubelet sent no service account token for audience "${audience}" (volume context ${VOLUME_CONTEXT.serviceAccountTokens}): authenticationSource pod needs the CSIDriver's spec.tokenRequests with that audience and requiresRepublish (deno task deploy renders both from podIdentity.audience)`,
    );
  }
  return entry.token;
}

/** Credentials of pod identity, with the renewal bookkeeping of each Mountpoint Pod. */
export class PodIdentity {
  readonly #o: PodIdentityOptions;
  /** Mountpoint Pod → expiry of the credentials last written into it (epoch ms). */
  readonly #written = new Map<string, number>();

  /** Create it. */
  constructor(options: PodIdentityOptions) {
    this.#o = options;
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }

  /**
   * Temporary credentials of the workload's role, for its token.
   * @throws {CsiError} FailedPrecondition (no token, no role), PermissionDenied (STS refused),
   *   Unavailable (STS unreachable)
   */
  async credentials(w: WorkloadIdentity): Promise<S3Credentials> {
    const token = webIdentityToken(w.tokens, this.#o.audience);
    if (!w.roleArn) {
      throw failedPrecondition(
        `No role for ServiceAccount ${w.serviceAccount}: the controller records it in the volume's attachment (volume attribute roleArn, or the ServiceAccount annotation s3.csi.scality.com/role-arn); run the controller of the node plugin's version`,
      );
    }
    const endpoint = this.#o.stsEndpoint ?? w.s3Endpoint ?? awsStsEndpoint(w.region);
    try {
      const c = await this.#o.sts.assumeRoleWithWebIdentity({
        endpoint,
        roleArn: w.roleArn,
        sessionName: sessionName(`s3-csi-${w.podUID}`),
        token,
        durationSeconds: this.#o.sessionSeconds,
      }, this.#o.timeoutMs);
      return {
        source: "pod",
        accessKeyId: c.accessKeyId,
        secretAccessKey: c.secretAccessKey,
        sessionToken: c.sessionToken,
        expiresAt: c.expiresAt,
      };
    } catch (err) {
      if (!(err instanceof StsError)) throw err;
      const what =
        `Assuming role ${w.roleArn} with ServiceAccount ${w.serviceAccount}'s token at ${endpoint}`;
      switch (err.kind) {
        case "access-denied":
        case "invalid-token":
          throw new CsiError(
            Code.PERMISSION_DENIED,
            `${what} was refused (${err.message}): check that the role exists, that its trust policy lets the ServiceAccount's subject (system:serviceaccount:${
              w.serviceAccount.replace("/", ":")
            }) assume it through the cluster's OIDC provider, and that the provider lists the audience "${this.#o.audience}"`,
            { cause: err },
          );
        case "unreachable":
          throw unavailable(`${what} failed: ${err.message}`, { cause: err });
        default:
          throw failedPrecondition(`${what} failed: ${err.message}`, { cause: err });
      }
    }
  }

  /** Whether Mountpoint Pod `mpName` needs fresh credentials (unknown ones count as due). */
  due(mpName: string): boolean {
    const expiresAt = this.#written.get(mpName);
    return expiresAt === undefined || expiresAt - this.#now() < this.#o.renewBeforeMs;
  }

  /** Remember that credentials expiring at `expiresAt` were written into `mpName`. */
  written(mpName: string, expiresAt: number): void {
    const now = this.#now();
    for (const [name, at] of this.#written) if (at < now) this.#written.delete(name);
    this.#written.set(mpName, expiresAt);
  }
}
