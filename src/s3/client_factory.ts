/**
 * S3 client settings shared by every S3 call of the controller: endpoint, path style, custom CA
 * bundle, proxy, timeouts, and checksum mode `WHEN_REQUIRED` (S3-compatible servers such as Ceph
 * RGW 16 answer 411 to the SDK's default aws-chunked uploads with streaming checksums; see
 * `tests/testbed/services/s3/README.md`).
 *
 * Requests go through Deno's `fetch` with a dedicated `Deno.HttpClient`, which carries the CA
 * bundle and the proxy; nothing depends on process-wide `HTTPS_PROXY` or `AWS_CA_BUNDLE`.
 *
 * @module
 */
import type { S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import type { StoreTarget } from "./bucket_store.ts";

/** Driver-level S3 connection settings. */
export interface S3ClientSettings {
  /** Endpoint URL, e.g. `https://s3.example.com`; AWS when undefined. */
  readonly endpoint?: string | undefined;
  /** Path-style addressing (`https://host/bucket/key`); needed by most S3-compatible servers. */
  readonly forcePathStyle: boolean;
  /** PEM text of extra trusted CA certificates. */
  readonly caBundlePem?: string | undefined;
  /** Proxy URL (`http://host:port`), for every S3 request. */
  readonly proxyUrl?: string | undefined;
  /** Deadline of one HTTP request. @default 8000 */
  readonly requestTimeoutMs?: number;
  /** SDK attempts per call (retries of 5xx/throttling). @default 3 */
  readonly maxAttempts?: number;
}

/** The checksum settings S3-compatible servers need. */
export const CHECKSUM_WHEN_REQUIRED = {
  requestChecksumCalculation: "WHEN_REQUIRED",
  responseChecksumValidation: "WHEN_REQUIRED",
} as const;

/**
 * Makes SDK clients for targets (credentials + region) with fixed connection settings. One
 * `Deno.HttpClient` is shared by all clients of a factory; {@link close} releases it.
 */
export class S3ClientFactory {
  readonly #settings: S3ClientSettings;
  #http: Deno.HttpClient | undefined;

  /** Create a factory; the SDK is loaded on the first {@link create}. */
  constructor(settings: S3ClientSettings) {
    this.#settings = settings;
  }

  /** The settings. */
  get settings(): S3ClientSettings {
    return this.#settings;
  }

  /** The SDK configuration for `target` (without the request handler). */
  config(target: StoreTarget): S3ClientConfig {
    const s = this.#settings;
    const c = target.credentials;
    return {
      region: target.region,
      ...(s.endpoint ? { endpoint: s.endpoint } : {}),
      forcePathStyle: s.forcePathStyle,
      credentials: {
        accessKeyId: c.accessKeyId,
        secretAccessKey: c.secretAccessKey,
        ...(c.sessionToken ? { sessionToken: c.sessionToken } : {}),
      },
      maxAttempts: s.maxAttempts ?? 3,
      ...CHECKSUM_WHEN_REQUIRED,
    };
  }

  /** A new SDK client for `target`; call `destroy()` on it when done. */
  async create(target: StoreTarget): Promise<S3Client> {
    const [{ S3Client }, { FetchHttpHandler }] = await Promise.all([
      import("@aws-sdk/client-s3"),
      import("@smithy/fetch-http-handler"),
    ]);
    const s = this.#settings;
    this.#http ??= Deno.createHttpClient({
      ...(s.caBundlePem ? { caCerts: [s.caBundlePem] } : {}),
      ...(s.proxyUrl ? { proxy: { url: s.proxyUrl } } : {}),
    });
    const client = this.#http;
    const requestHandler = new FetchHttpHandler({
      requestTimeout: s.requestTimeoutMs ?? 8000,
      requestInit: () => ({ client }) as RequestInit,
    });
    return new S3Client({ ...this.config(target), requestHandler });
  }

  /** Release the shared HTTP client. */
  close(): void {
    this.#http?.close();
    this.#http = undefined;
  }
}
