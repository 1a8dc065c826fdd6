/**
 * {@link BucketProbe}: one `HeadBucket` before a new source mount, so that a missing bucket, wrong
 * credentials or an unreachable endpoint fail NodePublishVolume at once with a message the user
 * can act on (engines such as rclone would otherwise mount fine and fail on first access).
 *
 * The real implementation loads `@aws-sdk/client-s3` on first use only.
 *
 * @module
 */
import { errorMessage, TimeoutError } from "../util/errors.ts";

/** What is probed. */
export interface ProbeTarget {
  /** Bucket name. */
  readonly bucket: string;
  /** S3 endpoint URL; the SDK default (AWS) when undefined. */
  readonly endpoint: string | undefined;
  /** Signing region. */
  readonly region: string;
  /** Path-style addressing. */
  readonly forcePathStyle: boolean;
  /** Credentials. */
  readonly accessKeyId: string;
  /** Credentials. */
  readonly secretAccessKey: string;
  /** Credentials. */
  readonly sessionToken?: string | undefined;
  /** Unsigned requests (`no-sign-request`, public buckets): the keys are not used. */
  readonly anonymous?: boolean;
  /** Send `x-amz-request-payer: requester` (`requester-pays`). */
  readonly requesterPays?: boolean;
  /** Send `x-amz-expected-bucket-owner` (`expected-bucket-owner`). */
  readonly expectedBucketOwner?: string | undefined;
}

/** Outcome of a probe. */
export type ProbeResult =
  | { readonly ok: true }
  | {
    readonly ok: false;
    readonly reason: "no-such-bucket" | "access-denied" | "unreachable" | "other";
    readonly message: string;
  };

/** Checks that a bucket is reachable with given credentials. */
export interface BucketProbe {
  /** Probe `target`; never throws (failures are results). */
  probe(target: ProbeTarget, timeoutMs: number): Promise<ProbeResult>;
}

/** Classify an SDK error. */
export function classifyProbeError(err: unknown): ProbeResult {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  const status = e?.$metadata?.httpStatusCode;
  const message = errorMessage(err);
  if (status === 404 || e?.name === "NotFound" || e?.name === "NoSuchBucket") {
    return { ok: false, reason: "no-such-bucket", message };
  }
  if (status === 403 || status === 401 || e?.name === "Forbidden") {
    return { ok: false, reason: "access-denied", message };
  }
  if (status === undefined || err instanceof TimeoutError) {
    return { ok: false, reason: "unreachable", message };
  }
  return { ok: false, reason: "other", message: `HTTP ${status}: ${message}` };
}

/** Connection settings of {@link AwsBucketProbe}. */
export interface AwsBucketProbeOptions {
  /** PEM text of extra trusted CA certificates (a private CA of the S3 endpoint). */
  readonly caBundlePem?: string | undefined;
}

/**
 * {@link BucketProbe} with `@aws-sdk/client-s3` over Deno's `fetch` with its own HTTP client,
 * which carries the CA bundle (the SDK reads no `AWS_CA_BUNDLE`); proxies come from the standard
 * `HTTP(S)_PROXY`/`NO_PROXY` variables, as for the engines.
 */
export class AwsBucketProbe implements BucketProbe {
  readonly #options: AwsBucketProbeOptions;
  #http: Deno.HttpClient | undefined;

  /** Create a probe; nothing is loaded or connected before the first probe. */
  constructor(options: AwsBucketProbeOptions = {}) {
    this.#options = options;
  }

  /** Load the SDK now (a few hundred ms), so the first publish does not pay for it. */
  async warm(): Promise<void> {
    await Promise.all([import("@aws-sdk/client-s3"), import("@smithy/fetch-http-handler")]);
  }

  /** {@inheritDoc BucketProbe.probe} */
  async probe(target: ProbeTarget, timeoutMs: number): Promise<ProbeResult> {
    const [{ S3Client, HeadBucketCommand }, { FetchHttpHandler }] = await Promise.all([
      import("@aws-sdk/client-s3"),
      import("@smithy/fetch-http-handler"),
    ]);
    const ca = this.#options.caBundlePem;
    this.#http ??= Deno.createHttpClient(ca ? { caCerts: [ca] } : {});
    const http = this.#http;
    const client = new S3Client({
      requestHandler: new FetchHttpHandler({
        requestTimeout: timeoutMs,
        requestInit: () => ({ client: http }) as RequestInit,
      }),
      region: target.region,
      ...(target.endpoint ? { endpoint: target.endpoint } : {}),
      forcePathStyle: target.forcePathStyle,
      // Anonymous requests are signed with placeholder keys and sent without the signature (below).
      credentials: target.anonymous ? { accessKeyId: "anonymous", secretAccessKey: "anonymous" } : {
        accessKeyId: target.accessKeyId,
        secretAccessKey: target.secretAccessKey,
        ...(target.sessionToken ? { sessionToken: target.sessionToken } : {}),
      },
      maxAttempts: 2,
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
    });
    if (target.anonymous) {
      // Unsigned, as the engine's requests with no-sign-request: the deserialize step sees the
      // request after signing, just before it is sent.
      client.middlewareStack.add(
        (next) => (args) => {
          const headers = (args.request as { headers?: Record<string, string> }).headers ?? {};
          for (const h of Object.keys(headers)) {
            if (/^(authorization|x-amz-date|x-amz-security-token|x-amz-content-sha256)$/i.test(h)) {
              delete headers[h];
            }
          }
          return next(args);
        },
        { step: "deserialize", name: "s3csiUnsigned", priority: "high" },
      );
    }
    if (target.requesterPays) {
      // HeadBucket has no RequestPayer field; the header is what S3 reads.
      client.middlewareStack.add(
        (next) => (args) => {
          const request = args.request as { headers?: Record<string, string> };
          if (request.headers) request.headers["x-amz-request-payer"] = "requester";
          return next(args);
        },
        { step: "build", name: "s3csiRequesterPays" },
      );
    }
    try {
      await client.send(
        new HeadBucketCommand({
          Bucket: target.bucket,
          ...(target.expectedBucketOwner
            ? { ExpectedBucketOwner: target.expectedBucketOwner }
            : {}),
        }),
        { abortSignal: AbortSignal.timeout(timeoutMs) },
      );
      return { ok: true };
    } catch (err) {
      const aborted = (err as { name?: string })?.name === "AbortError" ||
        (err as { name?: string })?.name === "TimeoutError";
      return classifyProbeError(
        aborted ? new TimeoutError(`S3 HeadBucket "${target.bucket}"`, timeoutMs) : err,
      );
    } finally {
      client.destroy();
    }
  }
}
