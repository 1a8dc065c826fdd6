/**
 * Bad NodePublishVolume inputs through the real node plugin: each gets a clear error with the
 * right gRPC code, and nothing is mounted. Run as root with RGW.
 */
import assert from "node:assert/strict";
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import { Code } from "../../src/csi/errors.ts";
import { exists } from "../_helpers.ts";
import { kubeletMkdirParent, nodeTest, startHarness } from "../testbed/harness/node_harness.ts";

interface Case {
  readonly name: string;
  readonly req: (base: NodePublishVolumeRequest) => NodePublishVolumeRequest;
  readonly code: Code;
  readonly message: RegExp;
}

const cap = (mountFlags: string[], mode = "MULTI_NODE_MULTI_WRITER") => ({
  volumeCapability: {
    mount: { mountFlags },
    accessMode: { mode: mode as "MULTI_NODE_MULTI_WRITER" },
  },
});

const CASES: Case[] = [
  {
    name: "unknown mount option",
    req: (b) => ({ ...b, ...cap(["allow-delete", "turbo-mode"]) }),
    code: Code.INVALID_ARGUMENT,
    message: /Mount option "turbo-mode" is not supported/,
  },
  {
    name: "forbidden option endpoint-url",
    req: (b) => ({ ...b, ...cap(["endpoint-url=http://evil.example"]) }),
    code: Code.INVALID_ARGUMENT,
    message:
      /"endpoint-url=http:\/\/evil.example" is not allowed: the S3 endpoint is set for the whole driver.*node-publish Secret \(key endpoint\)/,
  },
  {
    name: "forbidden FUSE -o option",
    req: (b) => ({ ...b, ...cap(["-o allow_other"]) }),
    code: Code.INVALID_ARGUMENT,
    message: /Mount option "-o allow_other" is not allowed/,
  },
  {
    name: "malformed option value",
    req: (b) => ({ ...b, ...cap(["uid=root"]) }),
    code: Code.INVALID_ARGUMENT,
    message: /"uid=root" is invalid: must be a user id from 1 to 2147483647/,
  },
  {
    name: "prefix escaping with ..",
    req: (b) => ({ ...b, ...cap(["prefix=a/../b/"]) }),
    code: Code.INVALID_ARGUMENT,
    message: /prefix=a\/\.\.\/b\/" is invalid/,
  },
  {
    name: ".. in target path",
    req: (b) => ({ ...b, targetPath: b.targetPath!.replace("/pods/", "/pods/../pods/") }),
    code: Code.INVALID_ARGUMENT,
    message: /must be an absolute path without "\.", "\.\." or empty segments/,
  },
  {
    name: "target path outside the kubelet dir",
    req: (b) => ({ ...b, targetPath: "/etc/pods/u/volumes/kubernetes.io~csi/pv/mount" }),
    code: Code.INVALID_ARGUMENT,
    message: /is not a kubelet CSI target path/,
  },
  {
    name: "missing volume id",
    req: (b) => ({ ...b, volumeId: "" }),
    code: Code.INVALID_ARGUMENT,
    message: /Volume ID not provided/,
  },
  {
    name: "missing bucketName",
    req: (b) => ({ ...b, volumeContext: {} }),
    code: Code.INVALID_ARGUMENT,
    message: /Bucket name not provided: set volumeAttributes.bucketName/,
  },
  {
    name: "unsupported access mode",
    req: (b) => ({ ...b, ...cap([], "MULTI_NODE_SINGLE_WRITER") }),
    code: Code.INVALID_ARGUMENT,
    message: /Access mode MULTI_NODE_SINGLE_WRITER is not supported/,
  },
  {
    name: "block volume",
    req: (b) => ({
      ...b,
      volumeCapability: { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
    }),
    code: Code.INVALID_ARGUMENT,
    message: /Block volumes are not supported/,
  },
  {
    name: "unknown authenticationSource",
    req: (b) => ({ ...b, volumeContext: { ...b.volumeContext, authenticationSource: "magic" } }),
    code: Code.INVALID_ARGUMENT,
    message:
      /Unknown authenticationSource "magic": use "driver" \(default\), "secret" \(with nodePublishSecretRef\) or "pod"/,
  },
  {
    name: "secret source without secrets (no fallback to driver keys)",
    req: (b) => ({ ...b, volumeContext: { ...b.volumeContext, authenticationSource: "secret" } }),
    code: Code.INVALID_ARGUMENT,
    message: /kubelet sent no node-publish secrets: set spec.csi.nodePublishSecretRef/,
  },
  {
    name: "bad secret (malformed keys)",
    req: (b) => ({
      ...b,
      volumeContext: { ...b.volumeContext, authenticationSource: "secret" },
      secrets: { access_key_id: "has spaces", secret_access_key: "x" },
    }),
    code: Code.INVALID_ARGUMENT,
    message: /Node-publish Secret: access key id is missing or malformed/,
  },
  {
    name: "secrets on a driver-credential volume",
    req: (b) => ({ ...b, secrets: { access_key_id: "AKIA", secret_access_key: "s" } }),
    code: Code.INVALID_ARGUMENT,
    message:
      /Secret has keys access_key_id, secret_access_key but authenticationSource is "driver"/,
  },
  {
    name: "fsGroup conflicting with gid option",
    req: (b) => ({
      ...b,
      volumeCapability: {
        mount: { mountFlags: ["gid=5"], volumeMountGroup: "1234" },
        accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
      },
    }),
    code: Code.INVALID_ARGUMENT,
    message: /"gid=5" conflicts with the pod's fsGroup 1234/,
  },
  {
    name: "bucket that does not exist",
    req: (b) => ({ ...b, volumeContext: { ...b.volumeContext, bucketName: "no-such-bucket-x1" } }),
    code: Code.FAILED_PRECONDITION,
    message: /Bucket "no-such-bucket-x1" does not exist/,
  },
  {
    name: "secret with wrong keys (access denied)",
    req: (b) => ({
      ...b,
      volumeContext: { ...b.volumeContext, authenticationSource: "secret" },
      secrets: { access_key_id: "WRONGKEY000000000000", secret_access_key: "wrongsecret0000" },
    }),
    code: Code.PERMISSION_DENIED,
    message: /Access to bucket "node-test-[a-z0-9-]+" was denied for the secret credentials/,
  },
  {
    name: "engine not installed in the Mountpoint Pod (reported by the mounter)",
    req: (b) => ({ ...b, volumeContext: { ...b.volumeContext, engine: "mount-s3" } }),
    code: Code.FAILED_PRECONDITION,
    message:
      /could not mount bucket .*Engine "mount-s3" is not installed in this Mountpoint Pod image/,
  },
  {
    name: "workload never assigned to a Mountpoint Pod",
    req: (b) => ({
      ...b,
      targetPath: b.targetPath!.replace("uid-bad", "uid-unassigned"),
      volumeContext: { bucketName: b.volumeContext!.bucketName! },
    }),
    code: Code.FAILED_PRECONDITION,
    message:
      /No Mountpoint Pod was assigned to pod uid-unassigned .* check that the s3-csi-controller/,
  },
];

nodeTest(
  `${CASES.length} bad NodePublishVolume inputs: clear errors, nothing mounted`,
  async (t) => {
    await using h = await startHarness({ nodeArgs: ["--attachment-timeout=2s"] });
    const mp = await h.mountpointPod("mp-bad");
    await h.assign("pv-bad", "vol-pv-bad", mp.name, ["uid-bad"]);
    const base = h.publishRequest("uid-bad", "pv-bad");
    await kubeletMkdirParent(base.targetPath!);
    for (const c of CASES) {
      await t.step(c.name, async () => {
        const err = await h.csi.node.nodePublishVolume(c.req(base)).then(
          () => undefined,
          (e: { code: number; details: string }) => e,
        );
        assert.ok(err, "the call must fail");
        assert.equal(err.code, c.code, `code of: ${err.details}`);
        assert.match(err.details, c.message);
        assert.deepEqual(await h.ourMounts(), [], "nothing mounted");
        assert.equal(await exists(base.targetPath!), false, "no target dir left");
        assert.equal(await exists(`${mp.commDir}/credentials`), false, "no credentials left");
      });
    }
    // The pod is still usable afterwards.
    await h.csi.node.nodePublishVolume(base);
    assert.equal((await h.ourMounts()).length, 2);
  },
);
