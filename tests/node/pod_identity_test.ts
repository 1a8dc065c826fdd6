/**
 * Pod-level identity end to end on Ceph RGW 16 with the real kube-apiserver as the OIDC issuer:
 * the node plugin process exchanges a real projected service account token (TokenRequest, the
 * audience of the CSIDriver's `tokenRequests`) with RGW's STS `AssumeRoleWithWebIdentity`, and
 * the Mountpoint Pod's `mount-s3` reads the bucket with the temporary credentials.
 *
 * What is real: etcd + kube-apiserver (`tests/testbed/services/kube_real/`, a state dir and ports
 * of the test's own, `--service-account-issuer=https://127.0.0.1:<port>`), Ceph RGW with STS
 * (`RGW_STS=1`, `rgw verify ssl = true`; its own state dir), the node plugin, the mounter and
 * `mount-s3`, FUSE. The apiserver's JWKS has no `x5c`, which RGW 16 requires: its discovery
 * document points (`--service-account-jwks-uri`) at `x5c_jwks.ts`, the same keys with a
 * certificate (`tests/testbed/services/s3/README.md`). S3PAs are written as the controller writes
 * them (the role of the ServiceAccount); the API emulator holds them, as in every node test.
 *
 * Proven: two ServiceAccounts, two roles, each mounts and reads only its own bucket; a token of
 * the other account is refused by STS (PermissionDenied, no mount left); a republish with a fresh
 * token renews the credentials in the Mountpoint Pod (another access key) without remounting,
 * and the mount keeps reading.
 *
 * @module
 */
import assert from "node:assert/strict";
import { CreateBucketCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { hostCommDir } from "../../src/mppod/paths.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { engineBin, versitygwReason } from "../testbed/harness/engine.ts";
import { freePort, tempDir, testOrSkip } from "../_helpers.ts";
import { startRealTier } from "../testbed/sandbox/kube_real.ts";
import { startRgw } from "../testbed/sandbox/s3_server.ts";
import { createBucketRole, createOidcProvider } from "../testbed/services/s3/iam.ts";
import { startX5cJwks } from "../testbed/services/kube_real/x5c_jwks.ts";
import { kubeletMkdirParent, skipReason, startHarness } from "../testbed/harness/node_harness.ts";

const AUDIENCE = "s3.csi.scality.com";
const NS = "team";

function reason(): string | undefined {
  // The node tier's own conditions (root, FUSE, setpriv, a readable checkout, mount-s3); this
  // test runs its own RGW, no versitygw.
  const node = skipReason({ s3: "versitygw" });
  if (node && node !== versitygwReason()) return node;
  if (engineBin().reason) return engineBin().reason;
  for (const bin of ["radosgw", "openssl", "unshare"]) {
    const ok = new Deno.Command("sh", { args: ["-c", `command -v ${bin}`], stdout: "null" })
      .outputSync().success;
    if (!ok) return `needs ${bin}`;
  }
  return undefined;
}

/** kubeconfig → server URL, CA file and bearer token (start.sh writes a token kubeconfig). */
async function adminOf(kubeconfig: string, state: string) {
  const text = await Deno.readTextFile(kubeconfig);
  const server = /server: (\S+)/.exec(text)![1]!;
  const token = /token: (\S+)/.exec(text)![1]!;
  const ca = await Deno.readTextFile(`${state}/pki/apiserver/apiserver.crt`);
  const http = Deno.createHttpClient({ caCerts: [ca] });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body ? { body: JSON.stringify(body) } : {}),
      client: http,
    } as RequestInit);
    const text = await res.text();
    if (!res.ok && res.status !== 409) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  return { server, ca, call, close: () => http.close() };
}

testOrSkip(reason(), {
  name: "pod identity on Ceph RGW 16 with the real apiserver as OIDC issuer",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    await using tmp = await tempDir("s3csi-podid-");
    const dir = tmp.path;
    const abort = new AbortController();
    const ports = { api: freePort(), jwks: freePort() };
    const kubeEnv = {
      KUBE_REAL_STATE: `${dir}/kube`,
      KUBE_REAL_ETCD_PORT: String(freePort()),
      KUBE_REAL_ETCD_PEER_PORT: String(freePort()),
      KUBE_REAL_APISERVER_PORT: String(ports.api),
      KUBE_REAL_KCM_PORT: String(freePort()),
      KUBE_REAL_SA_ISSUER: `https://127.0.0.1:${ports.api}`,
      KUBE_REAL_APISERVER_ARGS: `--service-account-jwks-uri=https://127.0.0.1:${ports.jwks}/jwks`,
    };
    const issuer = kubeEnv.KUBE_REAL_SA_ISSUER;
    const kube = await startRealTier(`${dir}/kube.log`, abort.signal, kubeEnv);
    const cleanups: (() => Promise<unknown>)[] = [() => kube.stop()];
    let passed = false;
    try {
      assert.ok(kube.startedHere, "a tier of the test's own");
      const admin = await adminOf(kube.kubeconfig, kubeEnv.KUBE_REAL_STATE);
      cleanups.push(() => Promise.resolve(admin.close()));
      const discovery = await admin.call("GET", "/.well-known/openid-configuration");
      assert.equal(discovery.issuer, issuer);
      assert.equal(discovery.jwks_uri, `https://127.0.0.1:${ports.jwks}/jwks`);
      const own = await admin.call("GET", "/openid/v1/jwks");
      assert.ok(own.keys.every((k: Record<string, unknown>) => !("x5c" in k)), "no x5c of its own");
      // RGW fetches the discovery document without credentials, as any OIDC consumer.
      await admin.call("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        metadata: { name: "oidc-discovery-anonymous" },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: "system:service-account-issuer-discovery",
        },
        subjects: [{
          apiGroup: "rbac.authorization.k8s.io",
          kind: "Group",
          name: "system:unauthenticated",
        }],
      });
      const jwks = await startX5cJwks({
        saPublicKeyFile: `${kubeEnv.KUBE_REAL_STATE}/pki/sa.pub`,
        apiserverJwks: own,
        port: ports.jwks,
        dir: `${dir}/jwks`,
      });
      cleanups.push(() => jwks.close());
      // RGW verifies the TLS of the issuer and the JWKS endpoint (rgw verify ssl = true).
      await Deno.writeTextFile(`${dir}/trust.pem`, `${admin.ca}\n${jwks.caPem}`);
      const rgw = await startRgw(dir, abort.signal, {
        RGW_STS: "1",
        RGW_VERIFY_SSL: "true",
        RGW_TRUST_CA: `${dir}/trust.pem`,
      });
      cleanups.push(() => rgw.stop());
      const s3 = new S3Client({
        endpoint: rgw.env.S3_ENDPOINT,
        region: rgw.env.AWS_REGION,
        forcePathStyle: true,
        credentials: {
          accessKeyId: rgw.env.AWS_ACCESS_KEY_ID,
          secretAccessKey: rgw.env.AWS_SECRET_ACCESS_KEY,
        },
        requestChecksumCalculation: "WHEN_REQUIRED",
        responseChecksumValidation: "WHEN_REQUIRED",
      });
      cleanups.push(() => Promise.resolve(s3.destroy()));
      // Ceph RGW 16 wants a thumbprint; it does not compare it (see the notes): zeros.
      await createOidcProvider(rgw.env, issuer, AUDIENCE, "0".repeat(40));
      const buckets = { a: "podid-a", b: "podid-b" };
      const roles: Record<"a" | "b", string> = { a: "", b: "" };
      await admin.call("POST", `/api/v1/namespaces`, { metadata: { name: NS } });
      for (const x of ["a", "b"] as const) {
        await admin.call("POST", `/api/v1/namespaces/${NS}/serviceaccounts`, {
          metadata: { name: `sa-${x}` },
        });
        await s3.send(new CreateBucketCommand({ Bucket: buckets[x] }));
        await s3.send(
          new PutObjectCommand({ Bucket: buckets[x], Key: "hello.txt", Body: `bucket ${x}\n` }),
        );
        roles[x] = await createBucketRole(
          rgw.env,
          `reader-${x}`,
          issuer,
          { namespace: NS, name: `sa-${x}` },
          buckets[x],
        );
      }
      /** A projected token of `sa-<x>` for the audience, as kubelet requests it. */
      const tokenOf = async (x: "a" | "b") => {
        const r = await admin.call(
          "POST",
          `/api/v1/namespaces/${NS}/serviceaccounts/sa-${x}/token`,
          {
            apiVersion: "authentication.k8s.io/v1",
            kind: "TokenRequest",
            spec: { audiences: [AUDIENCE], expirationSeconds: 600 },
          },
        );
        return JSON.stringify({
          [AUDIENCE]: { token: r.status.token, expirationTimestamp: r.status.expirationTimestamp },
        });
      };

      await using h = await startHarness({
        s3: "rgw",
        rgwEnv: rgw.env,
        defaultEngine: "mount-s3",
        nodeArgs: [
          `--pod-identity-audience=${AUDIENCE}`,
          "--pod-identity-session=15m",
          // Every republish renews (the lifetime is 15 min): a renewal is seen at once.
          "--pod-identity-renew-before=15m",
        ],
      });
      const publishAs = async (
        x: "a" | "b",
        pv: string,
        uid: string,
        bucket: string,
        tokens?: string,
      ) => {
        const req = h.publishRequest(uid, pv, {
          volumeContext: {
            bucketName: bucket,
            authenticationSource: "pod",
            "csi.storage.k8s.io/pod.uid": uid,
            "csi.storage.k8s.io/pod.namespace": NS,
            "csi.storage.k8s.io/serviceAccount.name": `sa-${x}`,
            "csi.storage.k8s.io/serviceAccount.tokens": tokens ?? await tokenOf(x),
          },
          volumeCapability: {
            mount: { mountFlags: [] },
            accessMode: { mode: "MULTI_NODE_READER_ONLY" },
          },
        });
        await kubeletMkdirParent(req.targetPath!);
        return await h.csi.node.nodePublishVolume(req);
      };
      const identity = (x: "a" | "b", role = roles[x]) => ({
        authenticationSource: "pod" as const,
        workloadNamespace: NS,
        workloadServiceAccountName: `sa-${x}`,
        workloadServiceAccountIAMRoleARN: role,
      });

      await t.step("each ServiceAccount mounts and reads only its own bucket", async () => {
        for (const x of ["a", "b"] as const) {
          const mp = await h.mountpointPod(`mp-${x}`);
          await h.assign(`pv-${x}`, `vol-pv-${x}`, mp.name, [`uid-${x}`], identity(x));
          await publishAs(x, `pv-${x}`, `uid-${x}`, buckets[x]);
          assert.equal(
            await Deno.readTextFile(`${h.target(`uid-${x}`, `pv-${x}`)}/hello.txt`),
            `bucket ${x}\n`,
          );
          const creds = await Deno.readTextFile(
            `${hostCommDir(h.root, mp.uid)}/credentials/s3-csi-credentials`,
          );
          assert.match(creds, /aws_session_token=/, "temporary credentials");
          assert.doesNotMatch(creds, new RegExp(rgw.env.AWS_ACCESS_KEY_ID), "not the driver's");
        }
      });

      await t.step(
        "the other account's token is refused by STS; its role cannot read the other bucket",
        async () => {
          const mp = await h.mountpointPod("mp-cross");
          // sa-b's token for role a (its trust policy names sa-a only).
          await h.assign(
            "pv-cross",
            "vol-pv-cross",
            mp.name,
            ["uid-cross"],
            identity("b", roles.a),
          );
          const failed = (p: Promise<unknown>) =>
            p.then(() => undefined, (e: { code: number; details: string }) => e);
          const refused = await failed(publishAs("b", "pv-cross", "uid-cross", buckets.a));
          assert.equal(refused?.code, 7, `PermissionDenied: ${refused?.details}`);
          assert.match(
            refused.details,
            /Assuming role arn:aws:iam:::role\/reader-a with ServiceAccount team\/sa-b's token at http:\/\/127\.0\.0\.1:\d+ was refused/,
          );
          // sa-a's role on bucket b: STS answers, the bucket check is denied.
          const mp2 = await h.mountpointPod("mp-cross2");
          await h.assign("pv-cross2", "vol-pv-cross2", mp2.name, ["uid-cross2"], identity("a"));
          const denied = await failed(publishAs("a", "pv-cross2", "uid-cross2", buckets.b));
          assert.equal(denied?.code, 7, `PermissionDenied: ${denied?.details}`);
          assert.match(
            denied.details,
            /Access to bucket "podid-b" was denied for the pod credentials/,
          );
          const ours = (await readMountInfo()).filter((m) => m.mountPoint.includes("cross"));
          assert.deepEqual(ours, [], "nothing mounted for the refused publishes");
        },
      );

      await t.step(
        "a republish with a fresh token renews the credentials without remounting",
        async () => {
          const target = h.target("uid-a", "pv-a");
          const mp = h.mpPods.find((p) => p.name === "mp-a")!;
          const credsFile = `${hostCommDir(h.root, mp.uid)}/credentials/s3-csi-credentials`;
          const before = await Deno.readTextFile(credsFile);
          const mountBefore = (await readMountInfo()).find((m) => m.mountPoint === target);
          assert.ok(mountBefore);
          await publishAs("a", "pv-a", "uid-a", buckets.a);
          const after = await Deno.readTextFile(credsFile);
          const keyOf = (text: string) => /aws_access_key_id=(\S+)/.exec(text)?.[1];
          assert.notEqual(keyOf(after), keyOf(before), "new temporary credentials");
          const mountAfter = (await readMountInfo()).find((m) => m.mountPoint === target);
          assert.equal(mountAfter?.majorMinor, mountBefore.majorMinor, "the same FUSE mount");
          assert.equal(await Deno.readTextFile(`${target}/hello.txt`), "bucket a\n");
          assert.match(h.node.stderr(), /Renewed the credentials of Mountpoint Pod "mp-a"/);
        },
      );
      passed = true;
    } finally {
      const problems: string[] = [];
      for (const c of cleanups.reverse()) await c().catch((e) => problems.push(String(e)));
      // Reported unless the test failed already (its error is the one to see).
      if (passed) assert.deepEqual(problems, [], "everything stopped");
      abort.abort();
    }
  },
});
