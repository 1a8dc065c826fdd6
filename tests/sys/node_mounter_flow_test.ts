/**
 * The whole node-plugin → mounter flow on the real kernel, with two Deno processes: this process
 * plays the node plugin (open /dev/fuse, mount, send the fd, close it, wait for readiness, bind
 * mount into a "pod" target, unmount); `_mounter_peer.ts` plays the mounter and runs
 * `rclone mount2 … /dev/fd/N` on the received fd.
 */
import assert from "node:assert/strict";
import { sendWithFd } from "../../src/sys/fd_passing.ts";
import { bindMount, closeFd, mountFuse, openFuse, unmount } from "../../src/sys/mount.ts";
import { findMount, mountsOfSource, readMountInfo } from "../../src/sys/mountinfo.ts";
import { waitMountReady } from "../../src/sys/mount_ready.ts";
import { connectUnix } from "../../src/sys/unix_socket.ts";
import { encodeMountMessage } from "../../src/mppod/mount_message.ts";
import {
  privilegedTest,
  rcloneSkipReason,
  statusWithin,
  tempDir,
} from "../testbed/harness/sys_helpers.ts";

const PEER = new URL("./_mounter_peer.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

function measure(what: string, value: number): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`  [measure] ${what}: ${value.toFixed(1)}\n`));
}

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  try {
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return text.split("\n")[0]!;
}

async function setUp(prefix: string) {
  const dir = await tempDir(prefix);
  const p = {
    dir,
    sock: `${dir.path}/comm/mount.sock`,
    data: `${dir.path}/data`,
    source: `${dir.path}/plugins/mnt/mp-1`,
    target: `${dir.path}/pods/uid-a/volumes/kubernetes.io~csi/pv-1/mount`,
  };
  for (const d of [`${dir.path}/comm`, p.data, p.source, p.target]) {
    await Deno.mkdir(d, { recursive: true });
  }
  await Deno.writeTextFile(`${p.data}/object.txt`, "object body\n");
  const mounter = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", CONFIG, PEER, p.sock, p.data],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  return { ...p, mounter };
}

/** Steps 1–5 of the node plugin: open, mount, connect, send, close. Returns ms taken. */
async function publishSource(source: string, sock: string): Promise<number> {
  const t0 = performance.now();
  const fd = openFuse();
  try {
    mountFuse(source, { fd, allowOther: true });
    using conn = await connectUnix(sock, { timeoutMs: 20_000 });
    const message = encodeMountMessage({
      bucketName: "demo-bucket",
      args: ["--allow-other"],
      env: ["HOME=/tmp", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
      volumeId: "pv-1",
    });
    await sendWithFd(conn, message, fd, { timeoutMs: 5000 });
  } catch (err) {
    unmount(source, { detach: true });
    throw err;
  } finally {
    closeFd(fd);
  }
  return performance.now() - t0;
}

privilegedTest(
  "node → mounter: fd passed, rclone serves it, bind into a pod, unmount ends the mounter",
  rcloneSkipReason(),
  async () => {
    const s = await setUp("flow");
    await using _dir = s.dir;
    try {
      const t0 = performance.now();
      const sentMs = await publishSource(s.source, s.sock);
      const info = JSON.parse(await firstLine(s.mounter.stdout));
      await waitMountReady(s.source, { timeoutMs: 15_000 });
      const readyMs = performance.now() - t0;
      bindMount(s.source, s.target, { readOnly: true });
      assert.equal(await Deno.readTextFile(`${s.target}/object.txt`), "object body\n");
      const mounts = await readMountInfo();
      const src = findMount(mounts, s.source)!;
      assert.equal(src.source, "mountpoint-s3");
      assert.equal(mountsOfSource(mounts, src).length, 2);
      assert.equal(info.bucket, "demo-bucket");
      measure("open+mount+connect+send ms (mounter process already started)", sentMs);
      measure("mounter receive ms", info.receiveMs);
      measure("publish to ready ms (fd passing + rclone start + FUSE_INIT)", readyMs);

      assert.equal(unmount(s.target), "unmounted");
      assert.equal(unmount(s.source), "unmounted");
      const status = await statusWithin(s.mounter, 10_000);
      assert.equal(status.code, 0, "rclone and the mounter exit 0 after the unmount");
    } finally {
      await statusWithin(s.mounter, 10_000).catch(() => {});
    }
  },
);

privilegedTest(
  "node → mounter: when the engine dies the mount fails fast with ENOTCONN",
  rcloneSkipReason(),
  async () => {
    const s = await setUp("dead");
    await using _dir = s.dir;
    try {
      await publishSource(s.source, s.sock);
      const info = JSON.parse(await firstLine(s.mounter.stdout));
      await waitMountReady(s.source, { timeoutMs: 15_000 });
      bindMount(s.source, s.target);
      Deno.kill(info.rclonePid, "SIGKILL");
      await statusWithin(s.mounter, 10_000);
      const t0 = performance.now();
      await assert.rejects(
        Deno.stat(`${s.target}/object.txt`),
        (e: unknown) => e instanceof Error && /os error 107/.test(e.message),
      );
      measure("ENOTCONN after engine death ms", performance.now() - t0);
      // Cleanup still works on a dead connection.
      assert.equal(unmount(s.target), "unmounted");
      assert.equal(unmount(s.source), "unmounted");
    } finally {
      await statusWithin(s.mounter, 10_000).catch(() => {});
    }
  },
);
