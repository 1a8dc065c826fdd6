/**
 * A behaviour suite shared by every {@link Sys}: `fake_sys_test.ts` runs it against
 * {@link FakeSys} (no permissions) and `tests/sys/real_sys_test.ts` against `RealSys` as root, so
 * the fake cannot drift from the kernel on the points callers rely on. Never imported by `cmd/`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { TimeoutError } from "../util/errors.ts";
import { isErrno } from "./errno.ts";
import { findMount, mountsOfSource } from "./mountinfo.ts";
import type { Sys } from "./sys.ts";

/** One fresh environment for a contract case. */
export interface SysContractTarget extends AsyncDisposable {
  /** The implementation under test. */
  readonly sys: Sys;
  /** An empty directory the case may use. */
  readonly dir: string;
  /** Create a directory (a no-op for a fake). */
  mkdir(path: string): Promise<void>;
}

/** Options of {@link sysContract}. */
export interface SysContractOptions {
  /** Skip every case, with this reason in the test names. */
  readonly skipReason?: string | undefined;
}

/** Register the contract cases with `Deno.test`, prefixed by `name`. */
export function sysContract(
  name: string,
  make: () => Promise<SysContractTarget>,
  options: SysContractOptions = {},
): void {
  const test = (title: string, fn: (t: SysContractTarget) => Promise<void>) =>
    Deno.test({
      name: `${name}: ${title}${options.skipReason ? ` (skipped: ${options.skipReason})` : ""}`,
      ignore: options.skipReason !== undefined,
      sanitizeResources: false,
      fn: async () => {
        await using target = await make();
        await fn(target);
      },
    });

  test("a FUSE source and its read-only bind show in the mount table", async ({ sys, dir, mkdir }) => {
    const source = `${dir}/source`;
    const target = `${dir}/target`;
    await mkdir(source);
    await mkdir(target);
    const fd = sys.openFuse();
    try {
      assert.equal(sys.fdTarget(fd), "/dev/fuse");
      assert.equal(sys.isFuseDevice(fd), true);
      await sys.mountFuse(source, { fd, allowOther: true });
      await sys.bindMount(source, target, { readOnly: true });
      const mounts = await sys.readMountInfo();
      const src = findMount(mounts, source);
      const tgt = findMount(mounts, target);
      assert.ok(src && tgt, "both are mounted");
      assert.equal(src.source, "mountpoint-s3");
      assert.equal(src.fsType, "fuse");
      assert.equal(tgt.majorMinor, src.majorMinor);
      for (const o of ["ro", "nosuid", "nodev"]) assert.ok(tgt.mountOptions.includes(o), o);
      assert.ok(src.superOptions.includes("allow_other"));
      assert.equal(mountsOfSource(mounts, src).length, 2);
      assert.equal(await sys.unmount(target), "unmounted");
      assert.equal(await sys.unmount(target), "not-mounted");
      assert.equal(await sys.unmount(source, { detach: true }), "unmounted");
      assert.equal(findMount(await sys.readMountInfo(), source), undefined);
    } finally {
      await sys.unmount(target, { detach: true });
      await sys.unmount(source, { detach: true });
      sys.closeFd(fd);
    }
    assert.throws(() => sys.closeFd(fd), (e: unknown) => isErrno(e, "EBADF"));
  });

  test("a message and one /dev/fuse fd cross a unix socket", async ({ sys, dir }) => {
    const path = `${dir}/mount.sock`;
    using listener = await sys.listenUnix(path, { mode: 0o600 });
    const fd = sys.openFuse();
    try {
      const [server, client] = await Promise.all([
        sys.accept(listener, { timeoutMs: 2000, allowUids: [0] }),
        sys.connectUnix(path, { timeoutMs: 2000 }),
      ]);
      using _server = server;
      assert.equal(sys.peerCredentials(server).uid, 0);
      await sys.sendWithFd(client, new TextEncoder().encode('{"bucketName":"b"}'), fd, {
        timeoutMs: 1000,
      });
      client.close();
      const { bytes, fds } = await sys.receiveWithFds(server, {
        maxBytes: 1024,
        timeoutMs: 1000,
        exactFds: 1,
      });
      assert.equal(new TextDecoder().decode(bytes), '{"bucketName":"b"}');
      assert.equal(fds.length, 1);
      assert.notEqual(fds[0], fd, "the receiver gets its own fd");
      assert.equal(sys.fdTarget(fds[0]!), "/dev/fuse");
      assert.equal(sys.isFuseDevice(fds[0]!), true, "the received fd is the FUSE device");
      fds.forEach((f) => sys.closeFd(f));
    } finally {
      sys.closeFd(fd);
    }
  });

  test("connectUnix() gives up after its timeout", async ({ sys, dir }) => {
    await assert.rejects(sys.connectUnix(`${dir}/missing.sock`, { timeoutMs: 50 }), TimeoutError);
  });

  test("accept() stops when its signal aborts", async ({ sys, dir }) => {
    using listener = await sys.listenUnix(`${dir}/abort.sock`);
    const ac = new AbortController();
    const reason = new Error("stop");
    setTimeout(() => ac.abort(reason), 20);
    await assert.rejects(
      sys.accept(listener, { timeoutMs: 5000, signal: ac.signal }),
      (e) => e === reason,
    );
  });
}
