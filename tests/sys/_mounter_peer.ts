/**
 * A minimal mounter for the end-to-end test, run as its own Deno process:
 * `deno run -A tests/sys/_mounter_peer.ts <socket> <data-dir>`. It receives one mount message
 * with one /dev/fuse fd, checks it, hands the fd to `rclone mount2 <data-dir> /dev/fd/N`, and
 * exits with rclone's exit code once the mount is gone. Stdout gets one JSON line as soon as
 * rclone runs: `{"rclonePid":…,"receiveMs":…}`.
 *
 * @module
 */
import { receiveWithFds } from "../../src/sys/fd_passing.ts";
import { clearCloexec, closeFd, isFuseDevice } from "../../src/sys/mount.ts";
import { accept, listenUnix } from "../../src/sys/unix_socket.ts";
import { MAX_MOUNT_MESSAGE_BYTES, parseMountMessage } from "../../src/mppod/mount_message.ts";

async function main(socket: string, dataDir: string): Promise<number> {
  using listener = await listenUnix(socket, { mode: 0o600 });
  const conn = await accept(listener, { timeoutMs: 20_000, allowUids: [0] });
  const t0 = performance.now();
  const { bytes, fds } = await receiveWithFds(conn, {
    maxBytes: MAX_MOUNT_MESSAGE_BYTES,
    timeoutMs: 10_000,
    exactFds: 1,
  });
  conn.close();
  const fd = fds[0]!;
  if (!isFuseDevice(fd)) {
    closeFd(fd);
    return 3;
  }
  const message = parseMountMessage(bytes);
  const receiveMs = performance.now() - t0;
  clearCloexec(fd);
  const child = new Deno.Command("rclone", {
    args: ["mount2", dataDir, `/dev/fd/${fd}`, "--config", "/dev/null", "--log-level", "ERROR"],
    env: Object.fromEntries(
      message.env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
    ),
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  closeFd(fd);
  const line = JSON.stringify({ rclonePid: child.pid, receiveMs, bucket: message.bucketName });
  await Deno.stdout.write(new TextEncoder().encode(`${line}\n`));
  return (await child.status).code;
}

if (import.meta.main) {
  const [socket, dataDir] = Deno.args;
  if (!socket || !dataDir) throw new Error("usage: _mounter_peer.ts <socket> <data-dir>");
  Deno.exit(await main(socket, dataDir));
}
