import assert from "node:assert/strict";
import { hostCommDir, parseTargetPath, pluginDir, sourceMountDir } from "./paths.ts";

Deno.test("hostCommDir() is the kubelet's emptyDir path of the comm volume", () => {
  assert.equal(
    hostCommDir("/var/lib/kubelet/", "uid-1"),
    "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~empty-dir/comm",
  );
});

Deno.test("sourceMountDir() and pluginDir() live under the driver's plugin dir", () => {
  assert.equal(
    sourceMountDir("/var/lib/kubelet", "mp-1"),
    "/var/lib/kubelet/plugins/s3.csi.scality.com/mnt/mp-1",
  );
  assert.equal(pluginDir("/k"), "/k/plugins/s3.csi.scality.com");
});

Deno.test("parseTargetPath() accepts only the kubelet CSI target shape", async (t) => {
  assert.deepEqual(
    parseTargetPath(
      "/var/lib/kubelet",
      "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv-a/mount",
    ),
    {
      podUID: "u1",
      volumeName: "pv-a",
    },
  );
  const bad = [
    "/other/pods/u1/volumes/kubernetes.io~csi/pv/mount",
    "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv",
    "/var/lib/kubelet/pods/../volumes/kubernetes.io~csi/pv/mount",
    "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/../mount",
    "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/pv/mount",
    "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv/mount/extra",
    "/var/lib/kubelet/pods//volumes/kubernetes.io~csi/pv/mount",
  ];
  for (const p of bad) {
    await t.step(p, () => assert.equal(parseTargetPath("/var/lib/kubelet", p), undefined));
  }
});
