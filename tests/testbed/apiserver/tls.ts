/**
 * Serving certificate for the emulator, generated at start with `openssl` by a CA made for it (EC
 * P-256 keys; valid for `localhost`, `127.0.0.1` and the listen host). kubectl only sends
 * credentials over https, so the emulator serves TLS by default.
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
  /** The CA that signed it (PEM), for clients to trust. */
  readonly ca: string;
}

/** `openssl` failed or is missing. */
export class CertificateError extends Error {
  /** Error name. */
  override name = "CertificateError";
}

/** How long `openssl` may take. */
const OPENSSL_TIMEOUT_MS = 15_000;

/** Run `openssl args` within the shared deadline. @throws {CertificateError} {TimeoutError} */
async function openssl(args: string[], signal: AbortSignal, timeout: AbortSignal): Promise<void> {
  const cmd = new Deno.Command("openssl", {
    args,
    stdout: "null",
    stderr: "piped",
    signal,
  });
  let out: Deno.CommandOutput;
  try {
    out = await cmd.output();
  } catch (err) {
    if (timeout.aborted) {
      throw new TimeoutError(`openssl ${args[0]}`, OPENSSL_TIMEOUT_MS, { cause: err });
    }
    throw new CertificateError(
      `Cannot run openssl: ${err instanceof Error ? err.message : err}`,
      { cause: err },
    );
  }
  if (!out.success) {
    throw new CertificateError(
      `openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr).trim()}`,
    );
  }
}

/**
 * Generate a CA and a serving certificate it signs for `host` (an IP or DNS name). Clients trust
 * the CA (the kubeconfig's `certificate-authority-data`), as they trust a cluster's CA: a
 * self-signed serving certificate cannot be a trust anchor for rustls (Deno's fetch), which refuses
 * a CA certificate as the server's own.
 */
export async function generateServingCert(
  host: string,
  signal?: AbortSignal,
): Promise<ServingCert> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-apiserver-tls-" });
  try {
    const san = new Set(["DNS:localhost", "IP:127.0.0.1"]);
    san.add(/^[\d.]+$/.test(host) || host.includes(":") ? `IP:${host}` : `DNS:${host}`);
    const timeout = AbortSignal.timeout(OPENSSL_TIMEOUT_MS);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    await openssl(
      [
        "req",
        "-x509",
        ...ec,
        "-days",
        "3650",
        "-subj",
        "/CN=s3csi-apiserver-emulator-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        `${dir}/ca-key.pem`,
        "-out",
        `${dir}/ca.pem`,
      ],
      both,
      timeout,
    );
    await openssl(
      [
        "req",
        ...ec,
        "-subj",
        "/CN=s3csi-apiserver-emulator",
        "-keyout",
        `${dir}/key.pem`,
        "-out",
        `${dir}/csr.pem`,
      ],
      both,
      timeout,
    );
    await Deno.writeTextFile(
      `${dir}/ext.cnf`,
      `subjectAltName=${[...san].join(",")}\nbasicConstraints=CA:FALSE\n` +
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    );
    await openssl(
      [
        "x509",
        "-req",
        "-in",
        `${dir}/csr.pem`,
        "-CA",
        `${dir}/ca.pem`,
        "-CAkey",
        `${dir}/ca-key.pem`,
        "-CAcreateserial",
        "-days",
        "3650",
        "-extfile",
        `${dir}/ext.cnf`,
        "-out",
        `${dir}/cert.pem`,
      ],
      both,
      timeout,
    );
    return {
      cert: await Deno.readTextFile(`${dir}/cert.pem`),
      key: await Deno.readTextFile(`${dir}/key.pem`),
      ca: await Deno.readTextFile(`${dir}/ca.pem`),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
