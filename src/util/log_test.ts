import assert from "node:assert/strict";
import {
  configureLogging,
  isSecretKey,
  logger,
  redact,
  REDACTED,
  redactUrlCredentials,
} from "./log.ts";

Deno.test("redact() masks secret maps, credential env strings and nested secrets", () => {
  const request = {
    volumeId: "vol-1",
    secrets: { access_key_id: "AKIA", secret_access_key: "s3cr3t" },
    volumeContext: { bucketName: "b" },
    nested: { deeper: { token: "tok", password: "pw" } },
    env: ["AWS_REGION=us-east-1", "AWS_SECRET_ACCESS_KEY=hunter2", "AWS_SESSION_TOKEN=abc"],
  };
  const out = JSON.stringify(redact(request));
  for (const secret of ["AKIA", "s3cr3t", "tok", "pw", "hunter2", "abc"]) {
    assert.ok(
      !out.includes(`"${secret}"`) && !out.includes(`=${secret}`),
      `${secret} leaked: ${out}`,
    );
  }
  assert.match(out, /"access_key_id":"\[REDACTED\]"/);
  assert.match(out, /AWS_REGION=us-east-1/);
  assert.match(out, /"bucketName":"b"/);
  assert.deepEqual(request.secrets.secret_access_key, "s3cr3t", "input must not be mutated");
});

Deno.test("isSecretKey() matches credential names, not ordinary ones", () => {
  for (
    const k of [
      "secrets",
      "Secret",
      "password",
      "token",
      "AWS_SECRET_ACCESS_KEY",
      "aws_session_token",
      // kubelet's service account tokens in a volume context (tokenRequests)
      "csi.storage.k8s.io/serviceAccount.tokens",
    ]
  ) {
    assert.ok(isSecretKey(k), k);
  }
  for (
    const k of [
      "volumeId",
      "bucketName",
      "secretName",
      "tokenRequests",
      "csi.storage.k8s.io/serviceAccount.name",
    ]
  ) {
    assert.ok(!isSecretKey(k), k);
  }
});

Deno.test("configureLogging() writes JSON lines with redacted properties", () => {
  const lines: string[] = [];
  configureLogging({ level: "debug", format: "json", write: (l) => lines.push(l) });
  logger("test").info("Publishing {volumeId}", {
    volumeId: "v1",
    request: { secrets: { key: "TOPSECRET" } },
  });
  logger("test").debug("debug shown");
  assert.equal(lines.length, 2);
  const rec = JSON.parse(lines[0]!);
  assert.equal(rec.message, 'Publishing "v1"');
  assert.equal(rec.level, "INFO");
  assert.equal(rec.logger, "s3csi.test");
  assert.deepEqual(rec.request, { secrets: { key: REDACTED } });
  assert.ok(!lines.join("").includes("TOPSECRET"));
});

Deno.test("configureLogging() honours the level and the text format", () => {
  const lines: string[] = [];
  configureLogging({ level: "warning", format: "text", write: (l) => lines.push(l) });
  logger("t").info("hidden");
  logger("t").warn("shown {n}", { n: 1 });
  assert.equal(lines.length, 1);
  assert.match(lines[0]!, /WRN.*s3csi\.t.*shown 1/);
});

Deno.test("redact() and the sink drop the user and password of URLs (a proxy's), wherever they are", () => {
  const proxy = "http://proxyuser:pr0xyP%40ss@proxy.corp:3128";
  assert.equal(redactUrlCredentials(proxy), `http://${REDACTED}@proxy.corp:3128`);
  assert.equal(
    redactUrlCredentials("via https://u@h/p?q=a@b and http://plain:3128 and mail a@b.c"),
    `via https://${REDACTED}@h/p?q=a@b and http://plain:3128 and mail a@b.c`,
  );
  const out = JSON.stringify(redact({
    proxy,
    env: [`HTTPS_PROXY=${proxy}`],
    error: new Error(`connect to ${proxy} failed`),
  }));
  assert.doesNotMatch(out, /proxyuser|pr0xyP/);
  const lines: string[] = [];
  configureLogging({ level: "info", format: "json", write: (l) => lines.push(l) });
  logger("test").info("Proxy {proxy} failed: {error}", {
    proxy,
    error: `dial ${proxy}: refused`,
  });
  assert.equal(lines.length, 1);
  assert.doesNotMatch(lines[0]!, /proxyuser|pr0xyP/, lines[0]!);
  assert.match(lines[0]!, /proxy\.corp:3128/);
});
