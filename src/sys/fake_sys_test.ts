import assert from "node:assert/strict";
import { SysError } from "./errno.ts";
import { FakeSys } from "./fake_sys.ts";
import { FdPassingError } from "./fd_passing.ts";
import { findMount, isMountPoint, mountsOfSource } from "./mountinfo.ts";
import { TimeoutError } from "../util/errors.ts";
import { sysContract } from "./sys_contract.ts";

const SOURCE = "/var/lib/kubelet/plugins/s3.csi/mnt/mp-1";
const TARGET = "/var/lib/kubelet/pods/uid-a/volumes/kubernetes.io~csi/pv-1/mount";

Deno.test("FakeSys mounts FUSE, binds read-only and unmounts like the kernel", async () => {
  const sys = new FakeSys();
  const fd = sys.openFuse();
  await sys.mountFuse(SOURCE, { fd, allowOther: true });
  await sys.bindMount(SOURCE, TARGET, { readOnly: true });
  let mounts = await sys.readMountInfo();
  const source = findMount(mounts, SOURCE)!;
  assert.equal(source.source, "mountpoint-s3");
  assert.ok(source.superOptions.includes("allow_other"));
  const target = findMount(mounts, TARGET)!;
  assert.equal(target.majorMinor, source.majorMinor);
  assert.deepEqual(target.mountOptions, ["ro", "nosuid", "nodev", "noatime"]);
  assert.equal(mountsOfSource(mounts, source).length, 2);

  assert.equal(await sys.unmount(TARGET), "unmounted");
  assert.equal(await sys.unmount(TARGET), "not-mounted");
  mounts = await sys.readMountInfo();
  assert.equal(isMountPoint(mounts, TARGET), false);
  assert.deepEqual(sys.callsOf("unmount").map((c) => c.args[0]), [TARGET, TARGET]);
  sys.closeFd(fd);
  assert.throws(() => sys.closeFd(fd), (e: unknown) => e instanceof SysError && e.code === "EBADF");
});

Deno.test("FakeSys.failNext() makes the next call throw once", async () => {
  const sys = new FakeSys();
  sys.failNext("bindMount", new SysError(16, "mount", { path: TARGET }));
  await assert.rejects(
    sys.bindMount("/", TARGET),
    (e: unknown) => e instanceof SysError && e.code === "EBUSY",
  );
  await sys.bindMount("/", TARGET);
  assert.equal(sys.callsOf("bindMount").length, 2);
});

Deno.test("FakeSys passes a message and a duplicated fd between connections", async () => {
  const sys = new FakeSys();
  using listener = await sys.listenUnix("/comm/mount.sock");
  const fd = sys.openFuse();
  const client = await sys.connectUnix("/comm/mount.sock", { timeoutMs: 100 });
  using server = await sys.accept(listener, { timeoutMs: 100, allowUids: [0] });
  await sys.sendWithFd(client, new TextEncoder().encode("{}"), fd, { timeoutMs: 100 });
  client.close();
  sys.closeFd(fd);
  const { bytes, fds } = await sys.receiveWithFds(server, {
    maxBytes: 10,
    timeoutMs: 100,
    exactFds: 1,
  });
  assert.equal(new TextDecoder().decode(bytes), "{}");
  assert.equal(sys.fdTarget(fds[0]!), "/dev/fuse");
  assert.equal(sys.peerCredentials(server).uid, 0);
});

Deno.test("FakeSys refuses oversize messages and times out without a listener", async () => {
  const sys = new FakeSys();
  using listener = await sys.listenUnix("/s");
  const client = await sys.connectUnix("/s", { timeoutMs: 100 });
  const server = await sys.accept(listener, { timeoutMs: 100 });
  await sys.sendWithFd(client, new Uint8Array(11), sys.openFuse(), { timeoutMs: 100 });
  client.close();
  await assert.rejects(
    sys.receiveWithFds(server, { maxBytes: 10, timeoutMs: 100 }),
    (e: unknown) => e instanceof FdPassingError && e.problem === "too-large",
  );
  assert.equal([...sys.fds.values()].length, 1, "the received duplicate was closed");
  await assert.rejects(sys.connectUnix("/missing", { timeoutMs: 20 }), TimeoutError);
});

sysContract("FakeSys", () => {
  const sys = new FakeSys();
  return Promise.resolve({
    sys,
    dir: "/fake/dir",
    mkdir: () => Promise.resolve(),
    [Symbol.asyncDispose]: () => Promise.resolve(),
  });
});
