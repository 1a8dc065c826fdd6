/**
 * Real mounts (root + /dev/fuse): a FUSE source served by `rclone mount2 <dir> /dev/fd/N`, bind
 * and read-only bind mounts, unmount idempotence, readahead and connection abort. Every test
 * unmounts what it made, even when it fails (`await using` temp dirs).
 */
import assert from "node:assert/strict";
import { isErrno, SysError } from "../../src/sys/errno.ts";
import {
  abortFuseConnection,
  bindMount,
  clearCloexec,
  closeFd,
  fdTarget,
  isCloexec,
  isFuseDevice,
  mountFuse,
  openFuse,
  setReadAheadKb,
  unmount,
} from "../../src/sys/mount.ts";
import { cstr, libc, O_CLOEXEC, O_RDONLY, O_RDWR } from "../../src/sys/libc.ts";
import { findMount, mountsOfSource, readMountInfo } from "../../src/sys/mountinfo.ts";
import { waitMountReady } from "../../src/sys/mount_ready.ts";
import { TimeoutError } from "../../src/util/errors.ts";
import {
  privilegedTest,
  rcloneSkipReason,
  rootSkipReason,
  startRclone,
  tempDir,
} from "../testbed/harness/sys_helpers.ts";

const ROOT = rootSkipReason();
const RCLONE = rcloneSkipReason();

async function layout(prefix: string) {
  const dir = await tempDir(prefix);
  const paths = {
    data: `${dir.path}/data`,
    source: `${dir.path}/source`,
    rw: `${dir.path}/rw`,
    ro: `${dir.path}/ro`,
  };
  for (const p of Object.values(paths)) await Deno.mkdir(p);
  await Deno.writeTextFile(`${paths.data}/hello.txt`, "hello from rclone\n");
  return { dir, ...paths };
}

privilegedTest("mountFuse() + rclone mount2 on /dev/fd/N serves the data dir", RCLONE, async () => {
  const l = await layout("fuse");
  await using _dir = l.dir;
  const t0 = performance.now();
  await using engine = startRclone(l.data, l.source);
  await waitMountReady(l.source, { timeoutMs: 10_000 });
  const readyMs = performance.now() - t0;
  assert.equal(await Deno.readTextFile(`${l.source}/hello.txt`), "hello from rclone\n");
  const m = findMount(await readMountInfo(), l.source);
  assert.ok(m, "source is in mountinfo");
  assert.equal(m.fsType, "fuse");
  assert.equal(m.source, "mountpoint-s3");
  for (const o of ["nosuid", "nodev", "noatime"]) assert.ok(m.mountOptions.includes(o), o);
  for (const o of ["user_id=0", "group_id=0", "default_permissions", "allow_other"]) {
    assert.ok(m.superOptions.includes(o), o);
  }
  recordNumber("mount+spawn ms", engine.mountMs);
  recordNumber("mount ready ms (rclone)", readyMs);

  setReadAheadKb(m.majorMinor, 1024);
  const ra = await Deno.readTextFile(`/sys/class/bdi/${m.majorMinor}/read_ahead_kb`);
  assert.equal(ra.trim(), "1024");
});

privilegedTest(
  "bindMount() makes rw and read-only binds that keep nosuid,nodev",
  RCLONE,
  async () => {
    const l = await layout("bind");
    await using _dir = l.dir;
    await using _engine = startRclone(l.data, l.source);
    await waitMountReady(l.source, { timeoutMs: 10_000 });

    bindMount(l.source, l.rw);
    bindMount(l.source, l.ro, { readOnly: true });
    const mounts = await readMountInfo();
    const src = findMount(mounts, l.source)!;
    const rw = findMount(mounts, l.rw)!;
    const ro = findMount(mounts, l.ro)!;
    assert.equal(rw.majorMinor, src.majorMinor);
    assert.ok(rw.mountOptions.includes("rw"));
    assert.ok(ro.mountOptions.includes("ro"));
    for (const o of ["nosuid", "nodev"]) {
      assert.ok(rw.mountOptions.includes(o), `rw keeps ${o}`);
      assert.ok(ro.mountOptions.includes(o), `ro keeps ${o}`);
    }
    assert.deepEqual(
      mountsOfSource(mounts, src).map((x) => x.mountPoint).sort(),
      [l.ro, l.rw, l.source].sort(),
    );

    assert.equal(await Deno.readTextFile(`${l.ro}/hello.txt`), "hello from rclone\n");
    await assert.rejects(Deno.writeTextFile(`${l.ro}/new.txt`, "x"), (e: unknown) => {
      assert.ok(e instanceof Error && /os error 30/.test(e.message), String(e));
      return true;
    });
    await Deno.writeTextFile(`${l.rw}/new.txt`, "written through the rw bind\n");
    assert.equal(await Deno.readTextFile(`${l.data}/new.txt`), "written through the rw bind\n");

    assert.equal(unmount(l.ro), "unmounted");
    assert.equal(unmount(l.rw), "unmounted");
    assert.equal(mountsOfSource(await readMountInfo(), src).length, 1, "only the source is left");
  },
);

privilegedTest("bindMount() of a missing source throws SysError ENOENT", ROOT, async () => {
  await using dir = await tempDir("bindmissing");
  await Deno.mkdir(`${dir.path}/t`);
  assert.throws(() => bindMount(`${dir.path}/nope`, `${dir.path}/t`), (e: unknown) => {
    assert.ok(e instanceof SysError && e.code === "ENOENT" && e.syscall === "mount", String(e));
    return true;
  });
});

privilegedTest("unmount() is idempotent", ROOT, async () => {
  await using dir = await tempDir("umount");
  const src = `${dir.path}/src`;
  const tgt = `${dir.path}/tgt`;
  await Deno.mkdir(src);
  await Deno.mkdir(tgt);
  bindMount(src, tgt);
  assert.equal(unmount(tgt), "unmounted");
  assert.equal(unmount(tgt), "not-mounted");
  assert.equal(unmount(`${dir.path}/does-not-exist`), "not-mounted");
  assert.equal(unmount(tgt, { detach: true }), "not-mounted");
  assert.equal(findMount(await readMountInfo(), tgt), undefined);
});

privilegedTest("unmount() of a busy mount throws EBUSY unless detached", ROOT, async () => {
  await using dir = await tempDir("busy");
  const src = `${dir.path}/src`;
  const tgt = `${dir.path}/tgt`;
  await Deno.mkdir(src);
  await Deno.mkdir(tgt);
  bindMount(src, tgt);
  const file = await Deno.open(`${tgt}/busy`, { create: true, write: true });
  try {
    assert.throws(() => unmount(tgt), (e: unknown) => isErrno(e, "EBUSY"));
    assert.equal(unmount(tgt, { detach: true }), "unmounted");
  } finally {
    file.close();
  }
});

privilegedTest(
  "waitMountReady() times out on a server that never answers and aborts it",
  ROOT,
  async () => {
    await using dir = await tempDir("noserver");
    const fd = openFuse();
    try {
      mountFuse(dir.path + "/", { fd });
      const m = findMount(await readMountInfo(), dir.path)!;
      const t0 = performance.now();
      await assert.rejects(waitMountReady(dir.path, { timeoutMs: 300 }), TimeoutError);
      assert.ok(performance.now() - t0 < 2000);
      // The connection is aborted: access fails at once instead of hanging.
      await assert.rejects(
        Deno.stat(dir.path),
        (e: unknown) => e instanceof Error && /os error 107/.test(e.message),
      );
      assert.equal(await abortFuseConnection(m.minor), "aborted");
      assert.equal(await abortFuseConnection(987654), "no-connection");
    } finally {
      closeFd(fd);
      unmount(dir.path, { detach: true });
    }
  },
);

privilegedTest("waitMountReady() honours an abort signal", ROOT, async () => {
  await using dir = await tempDir("readyabort");
  const fd = openFuse();
  try {
    mountFuse(dir.path, { fd });
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("stop")), 100);
    await assert.rejects(
      waitMountReady(dir.path, { timeoutMs: 10_000, signal: ac.signal }),
      /stop/,
    );
  } finally {
    closeFd(fd);
    unmount(dir.path, { detach: true });
  }
});

privilegedTest("openFuse(), fdTarget() and clearCloexec()", ROOT, () => {
  const fd = openFuse();
  try {
    assert.equal(fdTarget(fd), "/dev/fuse");
    assert.equal(isCloexec(fd), true);
    clearCloexec(fd);
    assert.equal(isCloexec(fd), false);
  } finally {
    closeFd(fd);
  }
  assert.throws(() => closeFd(fd), (e: unknown) => isErrno(e, "EBADF"));
  return Promise.resolve();
});

privilegedTest(
  "isFuseDevice() judges the device, not the path: /dev/fuse seen through a bind of /dev (a chroot) is FUSE; /dev/null and a file are not",
  ROOT,
  async () => {
    await using dir = await tempDir("fusedev");
    await Deno.mkdir(`${dir.path}/dev`);
    bindMount("/dev", `${dir.path}/dev`);
    const open = (path: string, flags: number) => {
      const fd = libc().open(cstr(path), flags | O_CLOEXEC, 0);
      assert.ok(fd >= 0, `open ${path}`);
      return fd;
    };
    const fds: number[] = [];
    try {
      const viaChroot = openFuse(`${dir.path}/dev/fuse`);
      fds.push(viaChroot);
      // What the mounter used to compare: the path differs, the device does not.
      assert.equal(fdTarget(viaChroot), `${dir.path}/dev/fuse`);
      assert.equal(isFuseDevice(viaChroot), true);
      const direct = openFuse();
      fds.push(direct);
      assert.equal(isFuseDevice(direct), true);
      const devNull = open("/dev/null", O_RDWR);
      fds.push(devNull);
      assert.equal(isFuseDevice(devNull), false, "another character device");
      const file = open("/etc/hostname", O_RDONLY);
      fds.push(file);
      assert.equal(isFuseDevice(file), false, "a regular file");
    } finally {
      fds.forEach(closeFd);
      unmount(`${dir.path}/dev`, { detach: true });
    }
    assert.throws(() => isFuseDevice(fds[0]!), Deno.errors.NotFound, "a closed fd");
  },
);

privilegedTest("mountFuse() with readOnly sets MS_RDONLY", ROOT, async () => {
  await using dir = await tempDir("fusero");
  const fd = openFuse();
  try {
    mountFuse(dir.path, { fd, readOnly: true, fsName: "test-fs" });
    const m = findMount(await readMountInfo(), dir.path)!;
    assert.ok(m.mountOptions.includes("ro"));
    assert.equal(m.source, "test-fs");
    assert.ok(!m.superOptions.includes("allow_other"));
  } finally {
    unmount(dir.path, { detach: true });
    closeFd(fd);
  }
});

/** Print a measured number in the test output (stderr, not a console call). */
function recordNumber(what: string, value: number): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`  [measure] ${what}: ${value.toFixed(1)}\n`));
}
