import assert from "node:assert/strict";
import {
  findMount,
  isMountPoint,
  mountContaining,
  MountInfoParseError,
  mountRefs,
  mountsOfSource,
  normalizeMountPath,
  parseMountInfo,
  parseMountInfoLine,
  unescapeMountField,
} from "./mountinfo.ts";

const KUBELET = "/var/lib/kubelet";
const SOURCE = `${KUBELET}/plugins/s3.csi.scality.com/mnt/mp-abc`;
const TARGET_A = `${KUBELET}/pods/uid-a/volumes/kubernetes.io~csi/pv-1/mount`;
const TARGET_B = `${KUBELET}/pods/uid-b/volumes/kubernetes.io~csi/pv-1/mount`;

// Captured on the test VM, then extended with FUSE source + binds like the node plugin makes.
const SAMPLE = [
  "22 27 0:21 / /proc rw,relatime - proc proc rw",
  "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard,resv_strict",
  "28 27 0:25 / /mnt/sandboxing/x ro,nosuid,nodev,relatime - tmpfs model_tools_unavailable ro,size=4k,mode=755",
  `42 27 0:39 / ${SOURCE} rw,nosuid,nodev,noatime - fuse mountpoint-s3 rw,user_id=0,group_id=0,default_permissions,allow_other`,
  `43 27 0:39 / ${TARGET_A} rw,nosuid,nodev,noatime shared:7 master:3 - fuse mountpoint-s3 rw,user_id=0,group_id=0,default_permissions,allow_other`,
  `45 27 0:39 / ${TARGET_B} ro,nosuid,nodev,noatime - fuse mountpoint-s3 rw,user_id=0,group_id=0,default_permissions,allow_other`,
  "46 27 0:39 /sub /mnt/sub rw,nosuid,nodev - fuse mountpoint-s3 rw,user_id=0,group_id=0",
  "47 27 0:41 / /tmp/with\\040space\\011tab\\134slash rw,relatime - tmpfs my\\040src rw,size=1024k",
  "",
].join("\n");

Deno.test("parseMountInfoLine() splits every field of a FUSE mount", () => {
  const m = parseMountInfoLine(SAMPLE.split("\n")[3]!);
  assert.deepEqual(m, {
    mountId: 42,
    parentId: 27,
    majorMinor: "0:39",
    major: 0,
    minor: 39,
    root: "/",
    mountPoint: SOURCE,
    mountOptions: ["rw", "nosuid", "nodev", "noatime"],
    optionalFields: [],
    fsType: "fuse",
    source: "mountpoint-s3",
    superOptions: ["rw", "user_id=0", "group_id=0", "default_permissions", "allow_other"],
  });
});

Deno.test("parseMountInfoLine() keeps optional fields apart from the separator", () => {
  const m = parseMountInfoLine(SAMPLE.split("\n")[4]!);
  assert.deepEqual(m.optionalFields, ["shared:7", "master:3"]);
  assert.equal(m.fsType, "fuse");
  assert.equal(m.source, "mountpoint-s3");
});

Deno.test("parseMountInfoLine() unescapes octal sequences in paths and source", () => {
  const m = parseMountInfoLine(SAMPLE.split("\n")[7]!);
  assert.equal(m.mountPoint, "/tmp/with space\ttab\\slash");
  assert.equal(m.source, "my src");
});

Deno.test("parseMountInfoLine() rejects malformed lines", async (t) => {
  for (
    const line of [
      "garbage",
      "1 2 0:3 / /x rw shared:1 ext4 /dev/x rw",
      "1 2 nope / /x rw - ext4 /dev/x rw",
      "x 2 0:3 / /x rw - ext4 /dev/x rw",
      "1 2 0:3 / /x rw -",
    ]
  ) {
    await t.step(line, () => assert.throws(() => parseMountInfoLine(line), MountInfoParseError));
  }
});

Deno.test("parseMountInfoLine() accepts a line without super options", () => {
  const m = parseMountInfoLine("1 2 0:3 / /x rw - tmpfs none");
  assert.deepEqual(m.superOptions, []);
});

Deno.test("unescapeMountField() decodes escaped bytes as UTF-8", () => {
  assert.equal(unescapeMountField("a\\303\\251b"), "aéb");
  assert.equal(unescapeMountField("plain"), "plain");
  assert.equal(unescapeMountField("\\040\\040"), "  ");
});

Deno.test("parseMountInfo() skips blank lines", () => {
  assert.equal(parseMountInfo(SAMPLE).length, 8);
  assert.deepEqual(parseMountInfo(""), []);
});

Deno.test("normalizeMountPath() drops repeated and trailing slashes", () => {
  assert.equal(normalizeMountPath("/a//b/"), "/a/b");
  assert.equal(normalizeMountPath("/"), "/");
  assert.equal(normalizeMountPath("//"), "/");
});

Deno.test("findMount() and isMountPoint() match the exact mount point", () => {
  const mounts = parseMountInfo(SAMPLE);
  assert.equal(findMount(mounts, `${TARGET_A}/`)?.mountId, 43);
  assert.equal(isMountPoint(mounts, TARGET_B), true);
  assert.equal(isMountPoint(mounts, `${TARGET_B}/inner`), false);
  assert.equal(isMountPoint(mounts, "/var/lib"), false);
  assert.equal(isMountPoint(mounts, "/"), true);
});

Deno.test("findMount() returns the topmost of stacked mounts", () => {
  const mounts = parseMountInfo(
    "1 0 0:1 / /x rw - tmpfs a rw\n2 1 0:2 / /x rw - tmpfs b rw\n",
  );
  assert.equal(findMount(mounts, "/x")?.source, "b");
});

Deno.test("mountContaining() picks the longest prefix", () => {
  const mounts = parseMountInfo(SAMPLE);
  assert.equal(mountContaining(mounts, `${TARGET_A}/dir/file`)?.mountId, 43);
  assert.equal(mountContaining(mounts, "/var/lib/kubelet")?.mountId, 27);
  assert.equal(mountContaining(mounts, "/procfoo")?.mountId, 27);
});

Deno.test("mountsOfSource() counts the source and its bind mounts, not sub-binds", () => {
  const mounts = parseMountInfo(SAMPLE);
  const source = findMount(mounts, SOURCE)!;
  assert.deepEqual(mountsOfSource(mounts, source).map((m) => m.mountId), [42, 43, 45]);
  assert.deepEqual(mountRefs(mounts, SOURCE), [TARGET_A, TARGET_B]);
  assert.deepEqual(mountRefs(mounts, TARGET_A), [SOURCE, TARGET_B]);
  assert.deepEqual(mountRefs(mounts, "/mnt/sub"), []);
});
