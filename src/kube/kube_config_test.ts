import assert from "node:assert/strict";
import { parse } from "yaml";
import {
  loadKubeConfig,
  mergeKubeconfigs,
  parseKubeconfig,
  resolveKubeconfig,
  type ResolveOptions,
} from "./kube_config.ts";
import { ExecCredentialSource } from "./exec_credential.ts";
import { ConfigError } from "../util/errors.ts";

const DOC = `apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443/", certificate-authority-data: ${btoa("CA PEM")}}
- name: c2
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u1
  user: {token: abc, client-certificate-data: ${btoa("CERT")}, client-key-data: ${btoa("KEY")}}
- name: u2
  user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws}}
contexts:
- name: one
  context: {cluster: c1, user: u1}
- name: two
  context: {cluster: c2, user: u2}
- name: three
  context: {cluster: c2}
current-context: one
`;

// deno-lint-ignore no-explicit-any
const y = (text: string): any => parse(text);

/** Resolve YAML documents (path → text) merged in order. */
function resolve(files: [string, string][], o: ResolveOptions = {}) {
  return resolveKubeconfig(mergeKubeconfigs(files.map(([p, t]) => [p, y(t)])), o);
}

function rejects(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ConfigError, `not a ConfigError: ${e}`);
    assert.match(e.message, pattern);
    return true;
  });
}

Deno.test("kubeconfig: server, CA, token and client certificate of the current context", () => {
  assert.deepEqual(parseKubeconfig(DOC, "/x/config"), {
    server: "https://10.0.0.1:6443",
    ca: "CA PEM",
    token: "abc",
    cert: "CERT",
    key: "KEY",
  });
  assert.deepEqual(parseKubeconfig(DOC, "/x/config", "three"), {
    server: "https://127.0.0.1:1",
    insecureSkipTLSVerify: true,
  });
});

Deno.test("kubeconfig: merged files follow client-go (first definition of a name wins; current-context from the first file that sets one)", () => {
  const a = `
clusters: [{name: shared, cluster: {server: "https://a.example:6443"}}]
users: [{name: me, user: {token: from-a}}]
`;
  const b = `
current-context: prod
clusters:
- {name: shared, cluster: {server: "https://b.example:6443"}}
- {name: prod, cluster: {server: "https://prod.example:6443"}}
users: [{name: me, user: {token: from-b}}]
contexts:
- {name: prod, context: {cluster: shared, user: me}}
- {name: other, context: {cluster: prod, user: me}}
`;
  const c = `
current-context: other
contexts: [{name: prod, context: {cluster: prod, user: me}}]
`;
  const got = resolve([["/k/a", a], ["/k/b", b], ["/k/c", c]]);
  assert.equal(got.context, "prod", "current-context of the first file that sets one (b)");
  assert.equal(got.server, "https://a.example:6443", "cluster 'shared' from a, not b");
  assert.equal(got.config.token, "from-a", "user 'me' from a, not b");
  assert.match(got.source, /\/k\/a, \/k\/b, \/k\/c \(merged\), context prod/);
  // --context picks another context; its definition is b's (c's duplicate is ignored).
  assert.equal(
    resolve([["/k/a", a], ["/k/b", b], ["/k/c", c]], { context: "other" }).server,
    "https://prod.example:6443",
  );
});

Deno.test("kubeconfig: relative file references resolve against the file that holds them", () => {
  rejects(
    () =>
      resolve([[
        "/nonexistent-dir-1/cfg",
        `
current-context: x
clusters: [{name: c, cluster: {server: "https://h", certificate-authority: ca.pem}}]
contexts: [{name: x, context: {cluster: c}}]
`,
      ]]),
    /certificate-authority "\/nonexistent-dir-1\/ca\.pem" cannot be read/,
  );
  const withToken = resolve([[
    "/d1/a",
    `
current-context: x
clusters: [{name: c, cluster: {server: "https://h"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
`,
  ], ["/d2/b", `users: [{name: u, user: {tokenFile: tok}}]`]]);
  assert.equal(withToken.config.tokenFile, "/d2/tok");
});

Deno.test("kubeconfig: clear errors for what cannot work", async (t) => {
  const base = (user: string, server = "https://h:6443") => `
current-context: x
clusters: [{name: c, cluster: {server: "${server}"}}]
users: [{name: u, user: ${user}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
`;
  const cases: [string, string, ResolveOptions, RegExp][] = [
    [
      "client certificate without key",
      base(`{client-certificate-data: ${btoa("CERT")}}`),
      {},
      /user "u" has a client certificate but no client key: set client-key or client-key-data/,
    ],
    [
      "client key without certificate",
      base(`{client-key-data: ${btoa("KEY")}}`),
      {},
      /has a client key but no client certificate/,
    ],
    [
      "auth-provider gcp",
      base(`{auth-provider: {name: gcp}}`),
      { exec: { stdinIsTerminal: false } },
      /auth-provider "gcp", which kubectl and client-go removed in Kubernetes 1\.26: use the exec plugin gke-gcloud-auth-plugin/,
    ],
    [
      "auth-provider azure",
      base(`{auth-provider: {name: azure}}`),
      {},
      /use the exec plugin kubelogin/,
    ],
    [
      "auth-provider oidc",
      base(`{auth-provider: {name: oidc}}`),
      {},
      /use an exec plugin such as kubelogin/,
    ],
    [
      "plain http without consent",
      base(`{token: t}`, "http://h:8080"),
      { exec: { stdinIsTerminal: false } },
      /server "http:\/\/h:8080" is plain http: .*Use https, or pass --allow-insecure-http/,
    ],
    ["not a URL", base(`{token: t}`, "10.0.0.1"), {}, /server "10.0.0.1" is not an https:\/\/ URL/],
    [
      "exec in an in-cluster binary",
      base(
        `{exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Never}}`,
      ),
      {},
      /uses an exec credential plugin, which this binary does not run/,
    ],
    [
      "exec v1 without interactiveMode",
      base(`{exec: {apiVersion: client.authentication.k8s.io/v1, command: x}}`),
      { exec: { stdinIsTerminal: false } },
      /interactiveMode is required with client.authentication.k8s.io\/v1/,
    ],
    [
      "exec v1alpha1",
      base(`{exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}}`),
      { exec: { stdinIsTerminal: false } },
      /v1alpha1 was removed/,
    ],
    [
      "exec interactiveMode Always without a terminal",
      base(
        `{exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Always}}`,
      ),
      { exec: { stdinIsTerminal: false } },
      /needs an interactive terminal \(interactiveMode: Always\), but standard input is not a terminal/,
    ],
    [
      "token and exec together",
      base(`{token: t, exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x}}`),
      { exec: { stdinIsTerminal: false } },
      /sets token and exec: only one may be used/,
    ],
    [
      "CA and insecure together",
      `
current-context: x
clusters: [{name: c, cluster: {server: "https://h", insecure-skip-tls-verify: true, certificate-authority-data: ${
        btoa("CA")
      }}}]
contexts: [{name: x, context: {cluster: c}}]
`,
      {},
      /certificate-authority and insecure-skip-tls-verify are set together/,
    ],
    ["unknown context", DOC, { context: "nope" }, /has no context named "nope"/],
    [
      "no current context",
      "clusters: []",
      {},
      /has no current-context: set one .* or pass --context/,
    ],
    [
      "context naming a missing user",
      `
current-context: x
clusters: [{name: c, cluster: {server: "https://h"}}]
contexts: [{name: x, context: {cluster: c, user: ghost}}]
`,
      {},
      /names user "ghost", which is not defined/,
    ],
  ];
  for (const [name, text, o, pattern] of cases) {
    await t.step(name, () => rejects(() => resolve([["/x/config", text]], o), pattern));
  }
  await t.step(
    "bad yaml",
    () => rejects(() => parseKubeconfig("a: [", "/x/config"), /is not valid YAML/),
  );
});

Deno.test("kubeconfig: the CLI accepts http only when asked, and exec users get a credential source", () => {
  const http = `
current-context: x
clusters: [{name: c, cluster: {server: "http://127.0.0.1:8080"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./bin/plugin, interactiveMode: IfAvailable}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
`;
  const got = resolve([["/etc/kube/config", http]], {
    allowHttp: true,
    exec: { stdinIsTerminal: false },
  });
  assert.equal(got.server, "http://127.0.0.1:8080");
  assert.ok(got.config.credentials instanceof ExecCredentialSource);
  assert.equal(got.config.token, undefined);
});

Deno.test("kubeconfig: in-cluster binaries need KUBECONFIG or the in-cluster environment", () => {
  assert.throws(
    () => loadKubeConfig(() => undefined),
    /No Kubernetes API configuration: set KUBECONFIG/,
  );
});
