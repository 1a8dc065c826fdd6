import assert from "node:assert/strict";
import type { PersistentVolume, Pod } from "../kube/types.ts";
import { canonicalSharingKey, s3paName } from "../mppod/naming.ts";
import { keyOfAttachment, sharingKey, SharingKeyError, specOfKey } from "./sharing_key.ts";

function pv(attrs: Record<string, string>, mountOptions = ["allow-delete"]): PersistentVolume {
  return {
    metadata: { name: "pv-1" },
    spec: {
      csi: {
        driver: "s3.csi.scality.com",
        volumeHandle: "vol-1",
        volumeAttributes: { bucketName: "b", ...attrs },
      },
      mountOptions,
    },
  };
}

const POD: Pod = {
  metadata: { name: "w", namespace: "default", uid: "u-1" },
  spec: { nodeName: "node-1", containers: [] },
};

Deno.test("sharingKey(): volumes with different caches never share a Mountpoint Pod", () => {
  const none = sharingKey(POD, pv({}), "1.0.0");
  assert.equal(none.cache, undefined, "no cache field without a cache");
  const small = sharingKey(POD, pv({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }), "1.0.0");
  const big = sharingKey(POD, pv({ cache: "emptyDir", cacheEmptyDirSizeLimit: "2Gi" }), "1.0.0");
  const same = sharingKey(
    POD,
    pv({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1024Mi" }),
    "1.0.0",
  );
  assert.equal(small.cache, "emptyDir;sizeLimit=1Gi");
  const names = new Set([none, small, big].map(s3paName));
  assert.equal(names.size, 3);
  assert.equal(s3paName(small), s3paName(same), "the same cache written differently shares");
  // The S3PA written for a key gives the key back (how the controller finds it again).
  assert.equal(
    canonicalSharingKey(keyOfAttachment({ ...specOfKey(small), mountpointS3PodAttachments: {} }, {
      "s3.csi.scality.com/mounted-by-csi-driver-version": "1.0.0",
    })),
    canonicalSharingKey(small),
  );
});

Deno.test("sharingKey(): keys without a cache keep their names (no cache in the canonical text)", () => {
  const key = sharingKey(POD, pv({}), "1.0.0");
  assert.equal(
    canonicalSharingKey(key),
    JSON.stringify(["node-1", "pv-1", "vol-1", "allow-delete", "", "driver", "", "", "1.0.0"]),
  );
});

Deno.test("sharingKey(): volumes with different node-publish Secrets (endpoints) never share", () => {
  const withRef = (name: string, attrs: Record<string, string> = {}): PersistentVolume => {
    const v = pv(attrs);
    return {
      ...v,
      spec: { ...v.spec, csi: { ...v.spec.csi!, nodePublishSecretRef: { name, namespace: "ns" } } },
    };
  };
  // A Secret with only endpoint/region on a driver-credential volume is in the key too.
  const siteA = sharingKey(POD, withRef("site-a"), "1.0.0");
  const siteB = sharingKey(POD, withRef("site-b"), "1.0.0");
  assert.deepEqual([siteA.authenticationSource, siteA.secretNamespace, siteA.secretName], [
    "driver",
    "ns",
    "site-a",
  ]);
  const names = new Set([sharingKey(POD, pv({}), "1.0.0"), siteA, siteB].map(s3paName));
  assert.equal(names.size, 3);
  assert.equal(s3paName(sharingKey(POD, withRef("site-a"), "1.0.0")), s3paName(siteA));
  assert.equal(
    sharingKey(POD, withRef("s", { authenticationSource: "secret" }), "1.0.0").secretName,
    "s",
  );
  assert.throws(
    () => sharingKey(POD, pv({ authenticationSource: "secret" }), "1.0.0"),
    /no spec.csi.nodePublishSecretRef/,
  );
});

Deno.test("sharingKey(): bad cache attributes are a SharingKeyError naming the PV", () => {
  assert.throws(
    () => sharingKey(POD, pv({ cache: "ephemeral" }), "1.0.0"),
    (e: unknown) => e instanceof SharingKeyError && /PV "pv-1": .*needs both/.test(e.message),
  );
});

Deno.test("sharingKey(): pod identity keys by namespace, ServiceAccount and role", () => {
  const role = "arn:aws:iam::tenant:role/team/reader";
  const podOf = (sa: string | undefined): Pod => ({
    ...POD,
    spec: { ...POD.spec, ...(sa ? { serviceAccountName: sa } : {}) },
  });
  const accounts = (ns: string, name: string) =>
    ns === "default" && name === "app" ? { "s3.csi.scality.com/role-arn": role } : undefined;
  const key = sharingKey(podOf("app"), pv({ authenticationSource: "pod" }), "1.0.0", accounts);
  assert.deepEqual(
    [key.workloadNamespace, key.workloadServiceAccountName, key.workloadServiceAccountIAMRoleARN],
    ["default", "app", role],
  );
  assert.match(
    canonicalSharingKey(key),
    /"pod=\[\\"default\\",\\"app\\",\\"arn:aws:iam::tenant:role\/team\/reader\\"\]"\]$/,
  );
  // No ServiceAccount named: "default"; it has no annotation and the volume names no role.
  assert.throws(
    () => sharingKey(podOf(undefined), pv({ authenticationSource: "pod" }), "1.0.0", accounts),
    /annotate ServiceAccount default\/default with s3.csi.scality.com\/role-arn/,
  );
  assert.throws(
    () => sharingKey(podOf("app"), pv({ authenticationSource: "pod", roleArn: "reader" }), "1.0.0"),
    /Role "reader" \(volume attribute roleArn of PV "pv-1"\) is not a role ARN/,
  );
  // Other sources carry no workload identity.
  assert.equal(
    sharingKey(podOf("app"), pv({}), "1.0.0", accounts).workloadServiceAccountName,
    undefined,
  );
});
