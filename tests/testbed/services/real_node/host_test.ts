import assert from "node:assert/strict";
import { containerIdOf, criLogText, podUidOfCgroup, processTree } from "./host.ts";
import { driverValues, imageArchives, LOCAL_REGISTRY } from "./driver_values.ts";

Deno.test("CRI log lines become the container's text; partial lines are joined", () => {
  const raw = [
    "2026-11-26T05:19:20.708Z stdout F hello",
    "2026-11-26T05:19:20.709Z stderr P par",
    "2026-11-26T05:19:20.709Z stderr P ti",
    "2026-11-26T05:19:20.710Z stderr F al",
    "2026-11-26T05:19:20.711Z stdout F ",
    "not a CRI line",
    "",
  ].join("\n");
  assert.equal(criLogText(raw), "hello\npartial\n\n");
});

Deno.test("pod UID from a kubepods cgroup path (cgroupfs, v1 and v2; systemd slices)", () => {
  const uid = "c992145a-b216-4ea1-9df3-34a187e973e3";
  assert.equal(podUidOfCgroup(`0::/kubepods/besteffort/pod${uid}/0123abcd\n`), uid);
  assert.equal(podUidOfCgroup(`12:memory:/kubepods/pod${uid}/0123abcd\n`), uid);
  assert.equal(
    podUidOfCgroup(`0::/kubepods.slice/kubepods-pod${uid.replaceAll("-", "_")}.slice/x\n`),
    uid,
  );
  assert.equal(podUidOfCgroup("0::/user.slice/session-1.scope\n"), undefined);
});

Deno.test("container id of a status; process tree of a pid", () => {
  assert.equal(containerIdOf({ name: "c", containerID: "containerd://abc" }), "abc");
  assert.equal(containerIdOf({ name: "c" }), undefined);
  const all = [
    { pid: 1, ppid: 0, cmdline: "init" },
    { pid: 10, ppid: 1, cmdline: "mounter" },
    { pid: 11, ppid: 10, cmdline: "rclone" },
    { pid: 12, ppid: 1, cmdline: "other" },
  ];
  assert.deepEqual(processTree(all, 10).map((p) => p.cmdline), ["mounter", "rclone"]);
});

Deno.test("deploy values: local images, never pulled, stand-in sidecars, the pods' S3 endpoint", () => {
  const v = driverValues({ imagePrefix: "localhost/s3csi-testbed" }, {
    endpoint: "http://192.0.2.2:4000",
    region: "us-east-1",
    accessKeyId: "AK",
    secretAccessKey: "SK",
  }) as {
    image: Record<string, string>;
    s3: Record<string, string>;
    mountpointPod: Record<string, string>;
  };
  assert.equal(v.image.registry, LOCAL_REGISTRY);
  assert.equal(v.image.pullPolicy, "Never");
  assert.equal(v.image.csiProvisioner, "localhost/s3csi-testbed/csi-provisioner:standin");
  assert.deepEqual(v.s3, { endpointUrl: "http://192.0.2.2:4000", region: "us-east-1" });
  assert.deepEqual(v.mountpointPod, { headroomImage: "localhost/s3csi-testbed/pause:3.10" });
  assert.equal(JSON.stringify(v).includes("SK"), false, "no key in the values");
});

Deno.test("the driver images' archives from the build's output (a second node imports them too)", () => {
  assert.deepEqual(
    imageArchives(
      "IMAGE_NODE=localhost/s3csi/s3-csi-node:0.1.0 /repo/dist/images/s3-csi-node.oci.tar\n" +
        "noise\nIMAGE_MOUNTER=localhost/s3csi/s3-csi-mounter:0.1.0 /repo/dist/images/m.oci.tar\n",
    ),
    ["/repo/dist/images/s3-csi-node.oci.tar", "/repo/dist/images/m.oci.tar"],
  );
});
