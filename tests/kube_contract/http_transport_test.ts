/**
 * The REST client's HTTP transport (`src/kube/http_transport.ts`) on local servers: plain http and
 * https with a CA (the emulator's certificate kit), misbehaving TCP servers (refused, closed),
 * aborts, a client certificate swap, and the trust client-go has: the kubeconfig's CA only (not
 * `DENO_CERT`, not the default roots), `insecure-skip-tls-verify`, `tls-server-name`; proxy
 * variables are not applied (as before with undici).
 *
 * The client certificate itself is not checked here: the local servers do not ask for one
 * (Deno.serve has no client authentication); tests/deploy/kubeconfig_test.ts runs the kubeconfig
 * users against the emulator.
 *
 * @module
 */
import assert from "node:assert/strict";
import { HttpTransport, type TransportOptions } from "../../src/kube/http_transport.ts";
import { generateServingCert, type ServingCert } from "../testbed/apiserver/tls.ts";
import { ROOT } from "../_helpers.ts";
import { rawHttpServer } from "./_raw_http_server.ts";

const make = (o: TransportOptions) => new HttpTransport(o);
const name = (s: string) => `kube http transport: ${s}`;

/** What a server saw of one request. */
interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: Headers;
  readonly body: string;
}

/** A Deno.serve server (https when `cert` is given) answering with `handler`. */
function serve(
  handler: (req: Request, seen: Seen) => Response | Promise<Response>,
  cert?: ServingCert,
): { url: string; seen: Seen[]; close: () => Promise<void> } {
  const seen: Seen[] = [];
  const server = Deno.serve({
    port: 0,
    hostname: "127.0.0.1",
    onListen: () => {},
    ...(cert ? { cert: cert.cert, key: cert.key } : {}),
  }, async (req) => {
    const s = {
      method: req.method,
      path: new URL(req.url).pathname + new URL(req.url).search,
      headers: req.headers,
      body: await req.text(),
    };
    seen.push(s);
    return await handler(req, s);
  });
  return {
    url: `${cert ? "https" : "http"}://127.0.0.1:${server.addr.port}`,
    seen,
    close: () => server.shutdown(),
  };
}

async function text(body: ReadableStream<Uint8Array> | null): Promise<string> {
  return body ? await new Response(body).text() : "";
}

const signal = () => AbortSignal.timeout(10_000);
let certs: ServingCert | undefined;
/** One CA and serving certificate for all cases (openssl takes a moment). */
async function serving(): Promise<ServingCert> {
  certs ??= await generateServingCert("127.0.0.1");
  return certs;
}

/**
 * A server answering with `handler` and a transport to it, over https when `tls`; `put` sends one
 * JSON write (with `guard`, when given).
 */
async function writeTarget(
  tls: boolean,
  handler: (req: Request) => Response | Promise<Response>,
) {
  const cert = tls ? await serving() : undefined;
  const s = serve(handler, cert);
  const t = make({ server: s.url, ...(cert ? { ca: cert.ca } : {}) });
  const put = (path: string, signal: AbortSignal, guard?: () => void) =>
    t.send(new URL(`${s.url}${path}`), {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: "{}",
      signal,
      guard,
    });
  return { s, t, put };
}

{
  Deno.test(name("sends method, headers and body; passes status, headers and body"), async () => {
    const s = serve((_req, seen) =>
      new Response(JSON.stringify({ got: seen.body }), {
        status: seen.path.startsWith("/missing") ? 404 : 201,
        headers: { "content-type": "application/json", "x-answer": "42" },
      })
    );
    const t = make({ server: s.url });
    try {
      const res = await t.send(new URL(`${s.url}/api/v1/pods?limit=5`), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: "Bearer tok",
          "user-agent": "s3-csi-test",
        },
        body: '{"a":1}',
        signal: signal(),
      });
      assert.equal(res.status, 201);
      assert.equal(res.ok, true);
      assert.equal(res.headers.get("x-answer"), "42");
      assert.deepEqual(JSON.parse(await text(res.body)), { got: '{"a":1}' });
      const seen = s.seen[0]!;
      assert.equal(seen.method, "POST");
      assert.equal(seen.path, "/api/v1/pods?limit=5");
      assert.equal(seen.headers.get("authorization"), "Bearer tok");
      assert.equal(seen.headers.get("user-agent"), "s3-csi-test");
      assert.equal(seen.headers.get("content-type"), "application/json");
      const missing = await t.send(new URL(`${s.url}/missing`), {
        method: "DELETE",
        headers: {},
        signal: signal(),
      });
      assert.equal(missing.status, 404);
      assert.equal(missing.ok, false);
      await missing.body?.cancel();
    } finally {
      await t.close();
      await s.close();
    }
  });

  Deno.test(name("a response body streams as it is written (watches)"), async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const s = serve(() =>
      new Response(
        new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode('{"type":"ADDED"}\n'));
            await released;
            c.enqueue(new TextEncoder().encode('{"type":"DELETED"}\n'));
            c.close();
          },
        }),
      )
    );
    const t = make({ server: s.url });
    try {
      const res = await t.send(new URL(`${s.url}/watch`), {
        method: "GET",
        headers: {},
        signal: signal(),
      });
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.equal(new TextDecoder().decode(first.value), '{"type":"ADDED"}\n');
      release();
      let rest = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        rest += new TextDecoder().decode(value);
      }
      assert.equal(rest, '{"type":"DELETED"}\n');
    } finally {
      await t.close();
      await s.close();
    }
  });

  Deno.test(name("an abort ends a request waiting for headers and a body being read"), async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const s = serve(async (req) => {
      if (new URL(req.url).pathname === "/slow") await released;
      return new Response(
        new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode("part"));
            await released;
            c.close();
          },
        }),
      );
    });
    const t = make({ server: s.url });
    try {
      const early = new AbortController();
      const waiting = t.send(new URL(`${s.url}/slow`), {
        method: "GET",
        headers: {},
        signal: early.signal,
      });
      setTimeout(() => early.abort(new Error("deadline")), 100);
      await assert.rejects(waiting);
      const late = new AbortController();
      const res = await t.send(new URL(`${s.url}/body`), {
        method: "GET",
        headers: {},
        signal: late.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      setTimeout(() => late.abort(new Error("deadline")), 100);
      // Either the read fails, or it ends; it never waits for the server.
      const ended = await reader.read().then(() => "ended", () => "failed");
      assert.ok(["ended", "failed"].includes(ended));
    } finally {
      release();
      await t.close();
      await s.close();
    }
  });

  for (const tls of [false, true]) {
    Deno.test(
      name(
        `a write aborted while it waits on a reused connection is never sent again (${
          tls ? "https" : "http"
        })`,
      ),
      async () => {
        // Deno's node:http re-sent such a request on another connection (the leader's fenced
        // write landed after its deadline): the agent refuses it (refuseAborted).
        let release!: () => void;
        const released = new Promise<void>((r) => (release = r));
        const { s, t, put } = await writeTarget(tls, async (req) => {
          if (new URL(req.url).pathname === "/hang") await released;
          return new Response("ok");
        });
        try {
          // Pooled connections to reuse, then the write that hangs, aborted by its deadline.
          for (const r of await Promise.all(["/a", "/b", "/c"].map((p) => put(p, signal())))) {
            assert.equal(await text(r.body), "ok");
          }
          const fence = new AbortController();
          const hung = put("/hang", fence.signal);
          await new Promise((r) => setTimeout(r, 200));
          const reason = new Error("the lease's deadline passed");
          fence.abort(reason);
          const ended = await Promise.race([
            hung.then(() => "answered", (e) => e === reason ? "aborted" : `failed: ${e}`),
            new Promise((r) => setTimeout(() => r("still waiting 3 s after the abort"), 3000)),
          ]);
          assert.equal(ended, "aborted", "the write ends with its abort's reason");
          await new Promise((r) => setTimeout(r, 1000));
          const hangs = s.seen.filter((x) => x.path === "/hang").length;
          assert.equal(hangs, 1, "the aborted write reached the server once, never again");
          // The pool still works.
          assert.equal(await text((await put("/d", signal())).body), "ok");
        } finally {
          release();
          await t.close();
          await s.close();
        }
      },
    );
  }

  for (const tls of [false, true]) {
    Deno.test(
      name(
        `the guard is asked when the connection is ready: closed by then, nothing is sent (${
          tls ? "https" : "http"
        })`,
      ),
      async () => {
        // The leader's write fence: asked when the request is made, a leader stopped (SIGSTOP)
        // before its bytes left sent them on resuming, after its lease had ended.
        const target = await writeTarget(tls, () => new Response("ok"));
        const { s, t } = target;
        const refusal = new Error("the fence closed");
        let open = true;
        let asked = 0;
        const put = (path: string) =>
          target.put(path, signal(), () => {
            asked++;
            if (!open) throw refusal;
          });
        const outcome = (p: Promise<{ body: ReadableStream<Uint8Array> }>) =>
          p.then(
            async (r) => `answered ${await text(r.body)}`,
            (e) => e === refusal ? "refused" : `${e}`,
          );
        try {
          // A new connection: the fence closes while it connects.
          let sent = put("/new");
          open = false;
          assert.equal(await outcome(sent), "refused", "on a new connection");
          // An open fence sends; then a pooled connection: the fence closes before the next tick.
          open = true;
          assert.equal(await outcome(put("/open")), "answered ok");
          sent = put("/pooled");
          open = false;
          assert.equal(await outcome(sent), "refused", "on a pooled connection");
          await new Promise((r) => setTimeout(r, 300));
          assert.deepEqual(s.seen.map((x) => x.path), ["/open"], "only the open write was sent");
          assert.ok(asked >= 3, `the guard was asked for each request (${asked})`);
          open = true;
          assert.equal(await outcome(put("/after")), "answered ok", "the pool still works");
          assert.equal(await outcome(put("/again")), "answered ok", "on a pooled connection");
          // The next request on that connection, unguarded, is sent too (ending a request from its
          // socket event once left Deno's pooled socket corked: the next one was never sent).
          const plain = await t.send(new URL(`${s.url}/plain`), {
            method: "GET",
            headers: {},
            signal: signal(),
          });
          assert.equal(await text(plain.body), "ok", "a request after a guarded one");
        } finally {
          await t.close();
          await s.close();
        }
      },
    );
  }

  Deno.test(name("network failures before a response are connection errors"), async () => {
    // Refused: a port nothing listens on.
    const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const refusedUrl = `http://127.0.0.1:${(probe.addr as Deno.NetAddr).port}`;
    probe.close();
    const refusing = make({ server: refusedUrl });
    const refused = await refusing.send(new URL(`${refusedUrl}/x`), {
      method: "GET",
      headers: {},
      signal: signal(),
    }).then(() => undefined, (err: unknown) => err);
    assert.ok(refused, "refused");
    assert.ok(refusing.isConnectionError(refused), `refused: ${refused}`);
    await refusing.close();
    // Closed after the request arrived, before any answer (a server restarting, a dropped
    // kept-alive connection).
    await using closing = rawHttpServer((_line, conn) => {
      conn.close();
      return undefined;
    });
    const t = make({ server: closing.url });
    try {
      const err = await t.send(new URL(`${closing.url}/x`), {
        method: "GET",
        headers: {},
        signal: signal(),
      }).then(() => undefined, (e: unknown) => e);
      assert.ok(err, "closed");
      assert.ok(t.isConnectionError(err), `closed: ${err}`);
      // Not a connection error: anything that is not a TypeError from send, an abort.
      assert.ok(!t.isConnectionError(new Error("x")));
      assert.ok(!t.isConnectionError(new DOMException("aborted", "AbortError")));
    } finally {
      await t.close();
    }
  });

  Deno.test(name("https with the server's CA; another CA is refused, not retried"), async () => {
    const cert = await serving();
    const s = serve(() => new Response("secure"), cert);
    const trusted = make({ server: s.url, ca: cert.ca });
    const other = await generateServingCert("127.0.0.1");
    const untrusted = make({ server: s.url, ca: other.ca });
    try {
      const res = await trusted.send(new URL(`${s.url}/`), {
        method: "GET",
        headers: {},
        signal: signal(),
      });
      assert.equal(await text(res.body), "secure");
      const err = await untrusted.send(new URL(`${s.url}/`), {
        method: "GET",
        headers: {},
        signal: signal(),
      }).then(() => undefined, (e: unknown) => e);
      assert.ok(err, "an untrusted server certificate fails");
      assert.ok(!untrusted.isConnectionError(err), `a TLS failure is not retried: ${err}`);
    } finally {
      await trusted.close();
      await untrusted.close();
      await s.close();
    }
  });

  Deno.test(name("a new client certificate leaves requests in flight alone"), async () => {
    const cert = await serving();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const s = serve((req) =>
      new URL(req.url).pathname === "/stream"
        ? new Response(
          new ReadableStream({
            async start(c) {
              c.enqueue(new TextEncoder().encode("a"));
              await released;
              c.enqueue(new TextEncoder().encode("b"));
              c.close();
            },
          }),
        )
        : new Response("ok"), cert);
    const t = make({ server: s.url, ca: cert.ca });
    try {
      const res = await t.send(new URL(`${s.url}/stream`), {
        method: "GET",
        headers: {},
        signal: signal(),
      });
      const reader = res.body!.getReader();
      await reader.read();
      // Any certificate will do: this server does not ask for one.
      t.useClientCertificate(cert.cert, cert.key);
      release();
      let rest = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        rest += new TextDecoder().decode(value);
      }
      assert.equal(rest, "b");
      const after = await t.send(new URL(`${s.url}/`), {
        method: "GET",
        headers: {},
        signal: signal(),
      });
      assert.equal(await text(after.body), "ok");
    } finally {
      await t.close();
      await s.close();
    }
  });
}

Deno.test(name("skips verification and verifies another name when asked"), async () => {
  const cert = await serving();
  const s = serve(() => new Response("secure"), cert);
  // The certificate names 127.0.0.1 and localhost.
  const insecure = make({ server: s.url, insecureSkipTLSVerify: true });
  const named = make({ server: s.url, ca: cert.ca, tlsServerName: "localhost" });
  const misnamed = make({ server: s.url, ca: cert.ca, tlsServerName: "elsewhere" });
  const noCa = make({ server: s.url });
  try {
    for (const t of [insecure, named]) {
      const res = await t.send(new URL(`${s.url}/`), {
        method: "GET",
        headers: {},
        signal: signal(),
      });
      assert.equal(await text(res.body), "secure");
    }
    for (const t of [misnamed, noCa]) {
      await assert.rejects(() =>
        t.send(new URL(`${s.url}/`), { method: "GET", headers: {}, signal: signal() })
      );
    }
  } finally {
    for (const t of [insecure, named, misnamed, noCa]) await t.close();
    await s.close();
  }
});

/**
 * Run `script` (a module importing the transport) in a fresh Deno with `env`: what the process's
 * environment changes must be seen from its start. Returns its stdout.
 */
async function inFreshDeno(script: string, env: Record<string, string>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-transport-" });
  try {
    const file = `${dir}/probe.ts`;
    await Deno.writeTextFile(file, script);
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", `--config=${ROOT}deno.json`, file],
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    return new TextDecoder().decode(out.stdout).trim();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  name("trusts the kubeconfig's CA only: not DENO_CERT, and proxy variables do not apply"),
  async () => {
    // Server certified by CA B; the client is given CA A; the process trusts B through DENO_CERT
    // (as the node plugin does for the S3 CA bundle) and has a proxy that does not exist.
    const a = await serving();
    const b = await generateServingCert("127.0.0.1");
    const s = serve(() => new Response("secure"), b);
    const dir = await Deno.makeTempDir({ prefix: "s3csi-transport-ca-" });
    try {
      await Deno.writeTextFile(`${dir}/a.pem`, a.ca);
      await Deno.writeTextFile(`${dir}/b.pem`, b.ca);
      const probe = (ca: string) => `
        import { HttpTransport } from "${ROOT}src/kube/http_transport.ts";
        const t = new HttpTransport({ server: "${s.url}", ca: Deno.readTextFileSync("${ca}") });
        try {
          const res = await t.send(new URL("${s.url}/"), {
            method: "GET", headers: {}, signal: AbortSignal.timeout(10_000),
          });
          console.log("connected", await new Response(res.body).text());
        } catch (err) {
          console.log("refused", t.isConnectionError(err) ? "as a connection error" : "");
        } finally {
          await t.close();
        }`;
      const env = {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        HOME: Deno.env.get("HOME") ?? "/root",
        DENO_CERT: `${dir}/b.pem`,
        HTTPS_PROXY: "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        ALL_PROXY: "http://127.0.0.1:9",
      };
      assert.equal(await inFreshDeno(probe(`${dir}/a.pem`), env), "refused");
      // The same process trusts B when the kubeconfig says so, directly (the proxy is ignored).
      assert.equal(await inFreshDeno(probe(`${dir}/b.pem`), env), "connected secure");
    } finally {
      await Deno.remove(dir, { recursive: true });
      await s.close();
    }
  },
);

Deno.test(
  name("keeps a connection for the next request, closes it once idle too long"),
  async () => {
    // Answers every request on its connection; counts connections.
    await using server = rawHttpServer(() => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    const url = server.url;
    const t = make({ server: url, idleTimeoutMs: 200 });
    const get = async () => {
      const res = await t.send(new URL(`${url}/`), {
        method: "GET",
        headers: {},
        signal: signal(),
      });
      assert.equal(await text(res.body), "ok");
    };
    try {
      await get();
      await get();
      assert.equal(server.accepted(), 1, "the second request reuses the kept-alive connection");
      await new Promise((r) => setTimeout(r, 700));
      assert.equal(server.closed(), 1, "the idle connection was closed by the pool");
      await get();
      assert.equal(server.accepted(), 2, "a request after that opens a new one");
    } finally {
      await t.close();
    }
  },
);
