/**
 * STS `AssumeRoleWithWebIdentity`: temporary S3 credentials for a role, in exchange for a web
 * identity token (a Kubernetes projected service account token). The call is not signed: the token
 * is the proof. Ceph RGW serves STS on its S3 endpoint; AWS on `https://sts.<region>.amazonaws.com`.
 *
 * {@link HttpStsClient} speaks the STS query protocol over Deno's `fetch` with its own HTTP client
 * (the custom CA bundle; proxies from `HTTP(S)_PROXY`/`NO_PROXY`); `FakeSts` (`fake_sts.ts`)
 * stands in for it in unit tests. Every failure is an {@link StsError} with a kind, so callers map failures to
 * gRPC codes without matching message text. The token never appears in an error.
 *
 * @module
 */
import { errorMessage } from "../util/errors.ts";

/** What is asked. */
export interface AssumeRoleRequest {
  /** STS endpoint URL (`scheme://host[:port]`). */
  readonly endpoint: string;
  /** ARN of the role. */
  readonly roleArn: string;
  /** Session name (`[\w+=,.@-]{2,64}`), recorded by the server with the session. */
  readonly sessionName: string;
  /** The web identity token (a JWT). */
  readonly token: string;
  /** Lifetime of the credentials (servers have a minimum: 900 s on AWS and Ceph RGW). */
  readonly durationSeconds: number;
}

/** Temporary credentials. */
export interface TemporaryCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
  /** When they stop working (epoch ms). */
  readonly expiresAt: number;
}

/** Classes of STS failure. */
export type StsErrorKind =
  /** The role may not be assumed with this token (trust policy, unknown role or provider). */
  | "access-denied"
  /** The token itself was refused (expired, bad signature, wrong audience). */
  | "invalid-token"
  /** No answer: connection refused, DNS, TLS, timeout. */
  | "unreachable"
  /** Anything else (the message has the server's code and text). */
  | "other";

/** An STS call failed. */
export class StsError extends Error {
  override name = "StsError";
  /** Create the error. */
  constructor(readonly kind: StsErrorKind, message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** Gets temporary credentials. */
export interface StsClient {
  /** @throws {StsError} */
  assumeRoleWithWebIdentity(
    req: AssumeRoleRequest,
    timeoutMs: number,
  ): Promise<TemporaryCredentials>;
}

/** The STS endpoint of AWS for a region. */
export function awsStsEndpoint(region: string): string {
  return `https://sts.${region}.amazonaws.com`;
}

/** A session name STS accepts, from free text: allowed characters only, 2 to 64 of them. */
export function sessionName(text: string): string {
  const name = text.replace(/[^\w+=,.@-]/g, "-").slice(0, 64);
  return name.length >= 2 ? name : `s3-csi-${name}`;
}

function xmlField(xml: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return m?.[1]?.replace(/&amp;/g, "&").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"').replace(/&apos;/g, "'");
}

/**
 * The credentials of an `AssumeRoleWithWebIdentityResponse`, or the {@link StsError} of an error
 * response (`<Error><Code>…</Code><Message>…</Message>`), given the HTTP status.
 * @throws {StsError}
 */
export function parseAssumeRoleResponse(status: number, xml: string): TemporaryCredentials {
  if (status === 200) {
    const accessKeyId = xmlField(xml, "AccessKeyId");
    const secretAccessKey = xmlField(xml, "SecretAccessKey");
    const sessionToken = xmlField(xml, "SessionToken");
    const expiration = xmlField(xml, "Expiration");
    const expiresAt = expiration === undefined ? NaN : Date.parse(expiration);
    if (accessKeyId && secretAccessKey && sessionToken && Number.isFinite(expiresAt)) {
      return { accessKeyId, secretAccessKey, sessionToken, expiresAt };
    }
    throw new StsError("other", `STS answered 200 without complete credentials`);
  }
  const code = xmlField(xml, "Code") ?? "";
  const message = (xmlField(xml, "Message") ?? "").slice(0, 300);
  const text = `STS answered HTTP ${status}${code ? ` ${code}` : ""}${
    message ? `: ${message}` : ""
  }`;
  if (/^(InvalidIdentityToken|ExpiredToken|IDPRejectedClaim|IDPCommunicationError)$/.test(code)) {
    return rethrow(new StsError("invalid-token", text));
  }
  // Ceph RGW answers a refused token or trust policy with 403 and an empty or "AccessDenied" code.
  if (status === 403 || status === 401 || code === "AccessDenied") {
    return rethrow(new StsError("access-denied", text));
  }
  return rethrow(new StsError("other", text));
}

function rethrow(err: StsError): never {
  throw err;
}

/** Connection settings of {@link HttpStsClient}. */
export interface HttpStsClientOptions {
  /** PEM text of extra trusted CA certificates. */
  readonly caBundlePem?: string | undefined;
}

/** {@link StsClient} over HTTP (the STS query protocol, form-encoded POST). */
export class HttpStsClient implements StsClient {
  readonly #options: HttpStsClientOptions;
  #http: Deno.HttpClient | undefined;

  /** Create a client; nothing is connected before the first call. */
  constructor(options: HttpStsClientOptions = {}) {
    this.#options = options;
  }

  /** {@inheritDoc StsClient.assumeRoleWithWebIdentity} */
  async assumeRoleWithWebIdentity(
    req: AssumeRoleRequest,
    timeoutMs: number,
  ): Promise<TemporaryCredentials> {
    const ca = this.#options.caBundlePem;
    this.#http ??= Deno.createHttpClient(ca ? { caCerts: [ca] } : {});
    const body = new URLSearchParams({
      Action: "AssumeRoleWithWebIdentity",
      Version: "2011-06-15",
      RoleArn: req.roleArn,
      RoleSessionName: req.sessionName,
      WebIdentityToken: req.token,
      DurationSeconds: String(req.durationSeconds),
    });
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${req.endpoint.replace(/\/+$/, "")}/`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
        body,
        signal: AbortSignal.timeout(timeoutMs),
        client: this.#http,
      } as RequestInit);
      text = (await res.text()).slice(0, 64 * 1024);
    } catch (err) {
      throw new StsError(
        "unreachable",
        `STS endpoint ${req.endpoint} did not answer: ${
          errorMessage(err).replaceAll(req.token, "…")
        }`,
        { cause: err },
      );
    }
    return parseAssumeRoleResponse(res.status, text);
  }

  /** Release the HTTP client. */
  close(): void {
    this.#http?.close();
    this.#http = undefined;
  }
}
