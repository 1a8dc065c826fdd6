import assert from "node:assert/strict";
import { loadKubeConfig, parseKubeconfig } from "./kube_config.ts";
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
  user: {exec: {command: aws}}
contexts:
- name: one
  context: {cluster: c1, user: u1}
- name: two
  context: {cluster: c2, user: u2}
- name: three
  context: {cluster: c2}
current-context: one
`;

Deno.test("parseKubeconfig() reads server, CA, token and client certificate of the current context", () => {
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

Deno.test("parseKubeconfig() refuses what it cannot do with a clear error", async (t) => {
  const cases: [string, string, string | undefined, RegExp][] = [
    ["exec plugin", DOC, "two", /uses an exec or auth-provider plugin/],
    ["unknown context", DOC, "nope", /has no context named "nope"/],
    ["no current context", "clusters: []", undefined, /has no current-context/],
    ["bad yaml", "a: [", undefined, /is not valid YAML/],
    [
      "bad server",
      DOC.replace("https://10.0.0.1:6443/", "10.0.0.1"),
      undefined,
      /is not an http\(s\) URL/,
    ],
  ];
  for (const [name, text, ctx, pattern] of cases) {
    await t.step(name, () => {
      assert.throws(
        () => parseKubeconfig(text, "/x/config", ctx),
        (e: unknown) => e instanceof ConfigError && pattern.test(e.message),
      );
    });
  }
});

Deno.test("loadKubeConfig() needs KUBECONFIG or the in-cluster environment", () => {
  assert.throws(
    () => loadKubeConfig(() => undefined),
    /No Kubernetes API configuration: set KUBECONFIG/,
  );
});
