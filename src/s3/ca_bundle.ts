/**
 * The custom CA bundle for S3 (`--s3-ca-bundle` / `AWS_CA_BUNDLE`), read once at start by the
 * node plugin and the CSI Controller service.
 *
 * @module
 */
import { ConfigError, errorMessage } from "../util/errors.ts";

/**
 * Read the PEM bundle at `path`; undefined when no path is set.
 * @throws {ConfigError} when the file cannot be read or holds no PEM certificate
 */
export async function readCaBundle(path: string | undefined): Promise<string | undefined> {
  if (!path) return undefined;
  let pem: string;
  try {
    pem = await Deno.readTextFile(path);
  } catch (err) {
    throw new ConfigError(`--s3-ca-bundle / AWS_CA_BUNDLE: ${errorMessage(err)}`);
  }
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) {
    throw new ConfigError(`--s3-ca-bundle / AWS_CA_BUNDLE: "${path}" holds no PEM certificate`);
  }
  return pem;
}
