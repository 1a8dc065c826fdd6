/**
 * Driver-level S3 client settings of the Controller service against RGW: a custom CA bundle (RGW
 * behind a TLS front with a self-signed certificate) and an HTTP proxy (a forward proxy that
 * counts what goes through it).
 */
import assert from "node:assert/strict";
import { IdentityService } from "../../src/csi/identity_service.ts";
import { CsiServer } from "../../src/csi/server.ts";
import { connectCsi } from "../../src/csi/client.ts";
import { createProvisioning } from "../../src/provisioning/create_provisioning.ts";
import { ConfigError } from "../../src/util/errors.ts";
import { tempDir } from "../_helpers.ts";
import { grpcError, RawS3, type Rgw, rgw, rgwTest, unique } from "./_rgw.ts";

const S3 = rgw();

/** A TLS terminator in front of RGW (raw TCP after the handshake, so signatures stay valid). */
function tlsFront(s: Rgw, cert: string, key: string) {
  const target = new URL(s.endpoint);
  const listener = Deno.listenTls({ hostname: "127.0.0.1", port: 0, cert, key });
  const conns = new Set<Deno.Conn>();
  const serve = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      (async () => {
        const up = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
        conns.add(up);
        await Promise.allSettled([
          conn.readable.pipeTo(up.writable),
          up.readable.pipeTo(conn.writable),
        ]);
      })().catch(() => {});
    }
  })().catch(() => {});
  return {
    url: `https://127.0.0.1:${listener.addr.port}`,
    async close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await serve;
    },
  };
}

/** A CA and a server certificate for 127.0.0.1 signed by it (rustls refuses a CA as leaf). */
async function makeCerts(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const run = async (args: string[]) => {
    const out = await new Deno.Command("openssl", { args, cwd: dir, stderr: "piped" }).output();
    if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
  };
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await run([
    "req",
    "-x509",
    ...ec,
    "-days",
    "1",
    "-subj",
    "/CN=s3csi-test-ca",
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
  ]);
  await run(["req", ...ec, "-subj", "/CN=127.0.0.1", "-keyout", "srv.key", "-out", "srv.csr"]);
  await Deno.writeTextFile(
    `${dir}/ext.cnf`,
    "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
  );
  await run([
    "x509",
    "-req",
    "-in",
    "srv.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    "ext.cnf",
    "-out",
    "srv.pem",
  ]);
  const read = (f: string) => Deno.readTextFile(`${dir}/${f}`);
  return { ca: await read("ca.pem"), cert: await read("srv.pem"), key: await read("srv.key") };
}

async function serveController(settings: {
  endpoint: string;
  ca?: string;
  proxy?: string;
}) {
  const dir = await tempDir("s3csi-prov-settings-");
  let caPath = "";
  if (settings.ca) {
    caPath = `${dir.path}/ca.pem`;
    await Deno.writeTextFile(caPath, settings.ca);
  }
  const env: Record<string, string> = {
    AWS_ACCESS_KEY_ID: S3!.main.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3!.main.secretAccessKey,
  };
  const p = await createProvisioning({
    "s3-endpoint-url": settings.endpoint,
    "s3-region": S3!.region,
    "s3-force-path-style": true,
    "s3-ca-bundle": caPath,
    "s3-proxy": settings.proxy ?? "",
    "s3-request-timeout": 3000,
  }, (n) => env[n]);
  const server = new CsiServer({
    socketPath: `${dir.path}/csi.sock`,
    services: { identity: new IdentityService({ controllerService: true }), controller: p.service },
  });
  await server.start();
  const csi = connectCsi(`${dir.path}/csi.sock`);
  return {
    csi,
    async [Symbol.asyncDispose]() {
      csi.close();
      await server.stop(1000);
      p.close();
      await dir[Symbol.asyncDispose]();
    },
  };
}

const REQ = (name: string) => ({
  name,
  volumeCapabilities: [{
    mount: { fsType: "" },
    accessType: "mount" as const,
    accessMode: { mode: "MULTI_NODE_MULTI_WRITER" as const },
  }],
  parameters: { deletePolicy: "delete-all" },
});

rgwTest(
  "custom CA bundle: trusted with it, refused (Unavailable, says what to check) without",
  async () => {
    await using certDir = await tempDir("s3csi-prov-ca-");
    const { ca, cert, key } = await makeCerts(certDir.path);
    const front = tlsFront(S3!, cert, key);
    const raw = new RawS3(S3!);
    const name = `pvc-tls-${unique()}`;
    try {
      {
        await using bad = await serveController({ endpoint: front.url });
        const [code, msg] = await grpcError(bad.csi.controller.createVolume(REQ(name)));
        assert.equal(code, 14, msg);
        assert.match(
          msg,
          /https:\/\/127\.0\.0\.1:\d+ is unreachable.*CaUsedAsEndEntity|certificate.*CA bundle/,
        );
      }
      await using good = await serveController({ endpoint: front.url, ca });
      const v = await good.csi.controller.createVolume(REQ(name));
      assert.ok(await raw.exists(name));
      await good.csi.controller.deleteVolume({ volumeId: v.volume!.volumeId! });
      assert.ok(!(await raw.exists(name)));
    } finally {
      await raw.remove(name);
      await raw.close();
      await front.close();
    }
  },
);

rgwTest("proxy: every S3 request of the Controller service goes through it", async () => {
  const seen: string[] = [];
  const proxy = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    seen.push(`${req.method} ${req.url}`);
    return fetch(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body ? await req.arrayBuffer() : null,
      redirect: "manual",
    });
  });
  const raw = new RawS3(S3!);
  const name = `pvc-proxy-${unique()}`;
  try {
    await using ctl = await serveController({
      endpoint: S3!.endpoint,
      proxy: `http://127.0.0.1:${proxy.addr.port}`,
    });
    const v = await ctl.csi.controller.createVolume(REQ(name));
    assert.ok(await raw.exists(name));
    await ctl.csi.controller.deleteVolume({ volumeId: v.volume!.volumeId! });
    assert.ok(seen.some((s) => s.startsWith(`PUT ${S3!.endpoint}/${name}`)), seen.join("\n"));
    assert.ok(seen.some((s) => s.startsWith(`DELETE ${S3!.endpoint}/${name}`)), seen.join("\n"));
  } finally {
    await raw.remove(name);
    await raw.close();
    await proxy.shutdown();
  }
});

rgwTest("an unreadable or non-PEM CA bundle stops start-up with a ConfigError", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(`${dir.path}/x.pem`, "not a certificate");
  const base = {
    "s3-endpoint-url": "",
    "s3-region": "us-east-1",
    "s3-force-path-style": true,
    "s3-proxy": "",
    "s3-request-timeout": 1000,
  };
  await assert.rejects(
    createProvisioning({ ...base, "s3-ca-bundle": `${dir.path}/missing.pem` }, () => undefined),
    (e) => e instanceof ConfigError && /AWS_CA_BUNDLE/.test(e.message),
  );
  await assert.rejects(
    createProvisioning({ ...base, "s3-ca-bundle": `${dir.path}/x.pem` }, () => undefined),
    (e) => e instanceof ConfigError && /holds no PEM certificate/.test(e.message),
  );
});
