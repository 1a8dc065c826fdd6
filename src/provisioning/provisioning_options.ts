/**
 * Driver-level S3 settings of the Controller service: the `s3-*` flags that `s3-csi-controller`
 * adds to its options, and {@link createProvisioning}, which turns them (plus the driver
 * credentials from the environment) into a ready {@link ControllerService}.
 *
 * @module
 */
import type { OptionSpecs, ParsedConfig } from "../util/config.ts";
import { ConfigError, errorMessage } from "../util/errors.ts";
import { awsBucketStores } from "../s3/aws_bucket_store.ts";
import { S3ClientFactory } from "../s3/client_factory.ts";
import { ControllerService } from "./controller_service.ts";
import { driverCredentialsFromEnv } from "./credentials.ts";

function urlOrEmpty(v: string): string | undefined {
  if (v === "") return undefined;
  try {
    const u = new URL(v);
    if (u.protocol === "http:" || u.protocol === "https:") return undefined;
  } catch { /* fall through */ }
  return `must be an http:// or https:// URL, got "${v}"`;
}

/** Flags of the Controller service (merged into the controller's options). */
export const PROVISIONING_OPTIONS = {
  "s3-endpoint-url": {
    type: "string",
    env: "AWS_ENDPOINT_URL",
    default: "",
    description: "S3 endpoint for provisioning (e.g. https://s3.example.com); AWS when empty",
    validate: urlOrEmpty,
  },
  "s3-region": {
    type: "string",
    env: "AWS_REGION",
    default: "us-east-1",
    description: "Default S3 region of provisioned volumes (StorageClass parameter region wins)",
  },
  "s3-force-path-style": {
    type: "boolean",
    env: "S3_FORCE_PATH_STYLE",
    default: true,
    description: "Path-style S3 addressing (needed by most S3-compatible servers)",
  },
  "s3-ca-bundle": {
    type: "string",
    env: "AWS_CA_BUNDLE",
    default: "",
    description: "PEM file of extra CA certificates trusted for the S3 endpoint",
  },
  "s3-proxy": {
    type: "string",
    env: "S3_PROXY",
    default: "",
    description: "Proxy URL for S3 requests (e.g. http://proxy:3128); none when empty",
    validate: urlOrEmpty,
  },
  "s3-request-timeout": {
    type: "duration",
    env: "S3_REQUEST_TIMEOUT",
    default: 8_000,
    description: "Deadline of one S3 request of the Controller service",
  },
} as const satisfies OptionSpecs;

/** The parsed values of {@link PROVISIONING_OPTIONS}. */
export type ProvisioningSettings = ParsedConfig<typeof PROVISIONING_OPTIONS>;

/** A Controller service and what to release with it. */
export interface Provisioning {
  /** The service to serve. */
  readonly service: ControllerService;
  /** Whether driver credentials are configured (for the start-up log). */
  readonly driverCredentials: boolean;
  /** Release HTTP connections. */
  close(): void;
}

/**
 * Build the Controller service from settings and the environment (`AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` = driver credentials).
 * @throws {ConfigError} when the CA bundle cannot be read
 */
export async function createProvisioning(
  settings: ProvisioningSettings,
  env: (name: string) => string | undefined = (n) => Deno.env.get(n),
): Promise<Provisioning> {
  let caBundlePem: string | undefined;
  const caPath = settings["s3-ca-bundle"];
  if (caPath) {
    try {
      caBundlePem = await Deno.readTextFile(caPath);
    } catch (err) {
      throw new ConfigError(`--s3-ca-bundle / AWS_CA_BUNDLE: ${errorMessage(err)}`);
    }
    if (!caBundlePem.includes("-----BEGIN CERTIFICATE-----")) {
      throw new ConfigError(`--s3-ca-bundle / AWS_CA_BUNDLE: "${caPath}" holds no PEM certificate`);
    }
  }
  const endpoint = settings["s3-endpoint-url"] || undefined;
  const clients = new S3ClientFactory({
    endpoint,
    forcePathStyle: settings["s3-force-path-style"],
    caBundlePem,
    proxyUrl: settings["s3-proxy"] || undefined,
    requestTimeoutMs: settings["s3-request-timeout"],
  });
  const driverCredentials = driverCredentialsFromEnv(env);
  const service = new ControllerService({
    stores: awsBucketStores(clients),
    defaultRegion: settings["s3-region"],
    driverCredentials,
    endpoint,
  });
  return { service, driverCredentials: !!driverCredentials, close: () => clients.close() };
}
