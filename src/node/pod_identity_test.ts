import assert from "node:assert/strict";
import { CsiError } from "../csi/errors.ts";
import { hostCommDir } from "../mppod/paths.ts";
import { FakeSts } from "../s3/fake_sts.ts";
import { StsError } from "../s3/sts.ts";
import { PodIdentity, webIdentityToken } from "./pod_identity.ts";
import { validatePublish } from "./publish_request.ts";
import { ROOT, world } from "./_test_fixtures.ts";

const AUDIENCE = "sts.example.com";
const ROLE = "arn:aws:iam:::role/reader-a";
const tokens = (token: string) =>
  JSON.stringify({ [AUDIENCE]: { token, expirationTimestamp: "2030-01-01T00:00:00Z" } });

/** A pod-identity publish request of workload `uid` (ServiceAccount ns/app) with `token`. */
const req = (target: string, token: string | undefined, more: Record<string, string> = {}) => ({
  volumeId: "vol-pv-1",
  targetPath: target,
  volumeCapability: {
    mount: { mountFlags: [] },
    accessMode: { mode: "MULTI_NODE_READER_ONLY" as const },
  },
  volumeContext: {
    bucketName: "bucket-a",
    authenticationSource: "pod",
    "csi.storage.k8s.io/pod.namespace": "ns",
    "csi.storage.k8s.io/serviceAccount.name": "app",
    ...(token ? { "csi.storage.k8s.io/serviceAccount.tokens": tokens(token) } : {}),
    ...more,
  },
});

async function identityWorld(renewBeforeMs = 60_000) {
  let now = Date.parse("2030-01-01T00:00:00Z");
  const sts = new FakeSts(() => now);
  sts.trust.set(ROLE, new Set(["jwt-1", "jwt-2"]));
  const podIdentity = new PodIdentity({
    sts,
    audience: AUDIENCE,
    stsEndpoint: undefined,
    sessionSeconds: 3600,
    renewBeforeMs,
    timeoutMs: 1000,
    now: () => now,
  });
  const w = await world({ podIdentity });
  const uid = await w.addMountpointPod("mp-1");
  await w.assign("pv-1", "mp-1", ["uid-a", "uid-b"], {
    authenticationSource: "pod",
    workloadNamespace: "ns",
    workloadServiceAccountName: "app",
    workloadServiceAccountIAMRoleARN: ROLE,
  });
  const creds = () =>
    w.files.files.get(`${hostCommDir(ROOT, uid)}/credentials/s3-csi-credentials`)?.data ?? "";
  return { w, sts, creds, advance: (ms: number) => (now += ms) };
}

Deno.test("webIdentityToken() takes the audience's token, or says what the CSIDriver lacks", () => {
  assert.equal(webIdentityToken(tokens("jwt"), AUDIENCE), "jwt");
  for (const bad of [undefined, "not json", tokens("jwt").replace(AUDIENCE, "other")]) {
    assert.throws(
      () => webIdentityToken(bad, AUDIENCE),
      (e: unknown) =>
        e instanceof CsiError && e.code === 9 &&
        /no service account token for audience "sts.example.com".*spec.tokenRequests/.test(
          e.message,
        ),
    );
  }
});

Deno.test("Publisher: pod identity mounts with STS credentials of the attachment's role", async () => {
  const { w, sts, creds } = await identityWorld();
  await using _w = w;
  const t = w.target("uid-a", "pv-1");
  assert.equal(
    await w.publisher.publish(validatePublish(req(t, "jwt-1"), ROOT), {}),
    "source-and-bind",
  );
  assert.deepEqual(
    sts.calls.map((c) => [c.endpoint, c.roleArn, c.token, c.durationSeconds, c.sessionName]),
    [["http://s3.local:9000", ROLE, "jwt-1", 3600, "s3-csi-uid-a"]],
    "the volume's S3 endpoint serves STS (Ceph RGW); the session is named after the workload",
  );
  assert.match(
    creds(),
    /aws_access_key_id=ASIAFAKE1\naws_secret_access_key=secret1\naws_session_token=session1/,
  );
  assert.doesNotMatch(creds(), /AKIATEST/, "never the driver's keys");
  for (let i = 0; i < 500 && !w.received.get("mp-1")?.length; i++) {
    await new Promise((r) => setTimeout(r, 2));
  }
  const msg = w.received.get("mp-1")?.[0];
  assert.ok(msg?.args.some((a) => a.includes("credential-source#pod")));
  assert.ok(!JSON.stringify(msg).includes("jwt-1"), "the token is not in the mount message");
});

Deno.test("Publisher: a republish renews due credentials with the fresh token, without remounting", async () => {
  const { w, sts, creds, advance } = await identityWorld(30 * 60_000);
  await using _w = w;
  const t = w.target("uid-a", "pv-1");
  await w.publisher.publish(validatePublish(req(t, "jwt-1"), ROOT), {});
  // Not due yet: nothing asked.
  assert.equal(
    await w.publisher.publish(validatePublish(req(t, "jwt-1"), ROOT), {}),
    "already-published",
  );
  assert.equal(sts.calls.length, 1);
  // 40 minutes later 20 are left (< 30): kubelet's next republish brings a new token.
  advance(40 * 60_000);
  assert.equal(
    await w.publisher.publish(validatePublish(req(t, "jwt-2"), ROOT), {}),
    "already-published",
  );
  assert.deepEqual(sts.calls.map((c) => c.token), ["jwt-1", "jwt-2"]);
  assert.match(creds(), /aws_access_key_id=ASIAFAKE2\n.*\naws_session_token=session2/s);
  assert.equal(w.sys.callsOf("mountFuse").length, 1, "the same FUSE mount");
  assert.equal(w.sys.callsOf("unmount").length, 0, "nothing unmounted");
  // A second workload of the same ServiceAccount joins: a bind, no STS call (not due).
  const tb = w.target("uid-b", "pv-1");
  assert.equal(await w.publisher.publish(validatePublish(req(tb, "jwt-2"), ROOT), {}), "bind");
  assert.equal(sts.calls.length, 2);
});

Deno.test("Publisher: pod identity refusals say what to fix and mount nothing", async () => {
  const { w, sts } = await identityWorld();
  await using _w = w;
  const t = w.target("uid-a", "pv-1");
  const publish = (r: ReturnType<typeof req>, secrets = {}) =>
    w.publisher.publish(validatePublish(r, ROOT), secrets);
  await assert.rejects(
    publish(req(t, "jwt-other")),
    (e: unknown) =>
      e instanceof CsiError && e.code === 7 &&
      /Assuming role arn:aws:iam:::role\/reader-a with ServiceAccount ns\/app's token at http:\/\/s3.local:9000 was refused .*trust policy lets the ServiceAccount's subject \(system:serviceaccount:ns:app\)/
        .test(e.message) &&
      !e.message.includes("jwt-other"),
  );
  await assert.rejects(publish(req(t, undefined)), /no service account token for audience/);
  sts.failNext = new StsError("unreachable", "STS endpoint http://s3.local:9000 did not answer");
  await assert.rejects(
    publish(req(t, "jwt-1")),
    (e: unknown) => e instanceof CsiError && e.code === 14,
  );
  await assert.rejects(
    publish(req(t, "jwt-1"), { access_key_id: "A", secret_access_key: "B" }),
    /Secret has keys access_key_id, secret_access_key but authenticationSource is "pod"/,
  );
  assert.throws(
    () => validatePublish(req(t, "jwt-1", { engine: "rclone" }), ROOT),
    /authenticationSource "pod" needs engine mount-s3/,
  );
  assert.equal(w.sys.callsOf("mountFuse").length, 0);
});
