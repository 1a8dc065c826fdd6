/**
 * {@link createProvisioning} turns the driver-level S3 settings of the Controller service (the
 * `s3-*` flags of `src/options/provisioning_options.ts`) plus the driver credentials from the
 * environment into a ready {@link ControllerService}.
 *
 * @module
 */
import type { ProvisioningSettings } from "../options/provisioning_options.ts";
import { awsBucketStores } from "../s3/aws_bucket_store.ts";
import { readCaBundle } from "../s3/ca_bundle.ts";
import { S3ClientFactory } from "../s3/client_factory.ts";
import { ControllerService } from "./controller_service.ts";
import { driverCredentialsFromEnv } from "./credentials.ts";

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
  const caBundlePem = await readCaBundle(settings["s3-ca-bundle"]);
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
