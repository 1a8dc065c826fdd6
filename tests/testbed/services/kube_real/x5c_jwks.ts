/**
 * A JWKS endpoint for the real kube-apiserver's service account keys **with `x5c` certificates**,
 * for OIDC consumers that need them: Ceph RGW 16 verifies a web identity token only with the
 * certificate in a key's `x5c` and refuses the apiserver's own JWKS, which has only `n`/`e`
 * (`tests/testbed/services/s3/README.md`). The apiserver stays the issuer: it signs the tokens and
 * serves the discovery document, whose `jwks_uri` (`--service-account-jwks-uri`) points here.
 *
 * The certificate carries the apiserver's public signing key and is issued by a throwaway test CA
 * (`openssl x509 -new -force_pubkey`): only public data of the cluster is needed. The endpoint
 * serves HTTPS with a certificate of the same CA ({@link X5cJwks.caPem}).
 *
 * @module
 */
import { errorMessage } from "../../../../src/util/errors.ts";

/** A running endpoint. */
export interface X5cJwks {
  /** `https://127.0.0.1:<port>/jwks`. */
  readonly url: string;
  /** PEM of the test CA (trust it to reach the endpoint). */
  readonly caPem: string;
  /** SHA-1 thumbprint (hex) of the `x5c` certificate, as OIDC providers register it. */
  readonly thumbprint: string;
  close(): Promise<void>;
}

async function openssl(args: string[], cwd: string): Promise<string> {
  const out = await new Deno.Command("openssl", { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  if (!out.success) {
    throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr).slice(0, 500)}`);
  }
  return new TextDecoder().decode(out.stdout);
}

/** Options of {@link startX5cJwks}. */
export interface X5cJwksOptions {
  /** The apiserver's public service account key (PEM), e.g. `<state>/pki/sa.pub`. */
  readonly saPublicKeyFile: string;
  /** The apiserver's JWKS (`GET /openid/v1/jwks`), whose keys get the `x5c`. */
  readonly apiserverJwks: { keys: Record<string, unknown>[] };
  readonly port: number;
  /** Where the keys and certificates are written. */
  readonly dir: string;
}

/** Issue the certificates and serve the JWKS on 127.0.0.1. */
export async function startX5cJwks(o: X5cJwksOptions): Promise<X5cJwks> {
  const d = o.dir;
  await Deno.mkdir(d, { recursive: true });
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
    "-days",
    "2",
    "-subj",
    "/CN=s3csi-test-oidc-ca",
  ], d);
  await openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "tls.key",
    "-out",
    "tls.csr",
    "-subj",
    "/CN=127.0.0.1",
  ], d);
  await Deno.writeTextFile(`${d}/tls.ext`, "subjectAltName=IP:127.0.0.1\n");
  await openssl([
    "x509",
    "-req",
    "-in",
    "tls.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    "tls.ext",
    "-out",
    "tls.crt",
  ], d);
  await openssl([
    "x509",
    "-new",
    "-subj",
    "/CN=kubernetes-service-account-signing-key",
    "-force_pubkey",
    o.saPublicKeyFile,
    "-key",
    "ca.key",
    "-days",
    "2",
    "-out",
    "sa.crt",
  ], d);
  const der = (await Deno.readTextFile(`${d}/sa.crt`)).replace(/-----[^-]+-----|\s/g, "");
  const thumbprint =
    (await openssl(["x509", "-in", "sa.crt", "-noout", "-fingerprint", "-sha1"], d))
      .trim().replace(/^.*=/, "").replaceAll(":", "");
  if (o.apiserverJwks.keys.length !== 1) {
    throw new Error(
      `the apiserver has ${o.apiserverJwks.keys.length} service account keys; Ceph RGW 16 reads only the first of a JWKS`,
    );
  }
  const body = JSON.stringify({ keys: o.apiserverJwks.keys.map((k) => ({ ...k, x5c: [der] })) });
  const ac = new AbortController();
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({
      hostname: "127.0.0.1",
      port: o.port,
      cert: await Deno.readTextFile(`${d}/tls.crt`),
      key: await Deno.readTextFile(`${d}/tls.key`),
      signal: ac.signal,
      onListen: () => {},
    }, () => new Response(body, { headers: { "content-type": "application/json" } }));
  } catch (err) {
    throw new Error(`JWKS endpoint on 127.0.0.1:${o.port}: ${errorMessage(err)}`);
  }
  return {
    url: `https://127.0.0.1:${o.port}/jwks`,
    caPem: await Deno.readTextFile(`${d}/ca.crt`),
    thumbprint,
    async close() {
      ac.abort();
      await server.finished;
    },
  };
}
