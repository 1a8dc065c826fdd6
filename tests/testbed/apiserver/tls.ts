/**
 * Self-signed serving certificate for the emulator, generated at start with `openssl` (an EC P-256
 * key, valid for `localhost`, `127.0.0.1` and the listen host). kubectl only sends credentials
 * over https, so the emulator serves TLS by default.
 *
 * @module
 */
import { TimeoutError } from "../../../src/util/errors.ts";

/** PEM-encoded certificate and key. */
export interface ServingCert {
  /** Certificate (PEM). */
  readonly cert: string;
  /** Private key (PEM). */
  readonly key: string;
}

/** `openssl` failed or is missing. */
export class CertificateError extends Error {
  /** Error name. */
  override name = "CertificateError";
}

/** How long `openssl` may take. */
const OPENSSL_TIMEOUT_MS = 15_000;

/** Generate a self-signed certificate for `host` (an IP or DNS name). */
export async function generateServingCert(
  host: string,
  signal?: AbortSignal,
): Promise<ServingCert> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-apiserver-tls-" });
  try {
    const san = new Set(["DNS:localhost", "IP:127.0.0.1"]);
    san.add(/^[\d.]+$/.test(host) || host.includes(":") ? `IP:${host}` : `DNS:${host}`);
    const timeout = AbortSignal.timeout(OPENSSL_TIMEOUT_MS);
    const cmd = new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "3650",
        "-subj",
        "/CN=s3csi-apiserver-emulator",
        "-addext",
        `subjectAltName=${[...san].join(",")}`,
        "-keyout",
        `${dir}/key.pem`,
        "-out",
        `${dir}/cert.pem`,
      ],
      stdout: "null",
      stderr: "piped",
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    let out: Deno.CommandOutput;
    try {
      out = await cmd.output();
    } catch (err) {
      if (timeout.aborted) {
        throw new TimeoutError("openssl req", OPENSSL_TIMEOUT_MS, { cause: err });
      }
      throw new CertificateError(
        `Cannot run openssl: ${err instanceof Error ? err.message : err}`,
        { cause: err },
      );
    }
    if (!out.success) {
      throw new CertificateError(
        `openssl req failed: ${new TextDecoder().decode(out.stderr).trim()}`,
      );
    }
    return {
      cert: await Deno.readTextFile(`${dir}/cert.pem`),
      key: await Deno.readTextFile(`${dir}/key.pem`),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
