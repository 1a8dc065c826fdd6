/**
 * The sending side of the fd-passing tests, run as a separate Deno process (like the node plugin):
 * `deno run -A tests/sys/_fd_peer.ts <socket> <mode> [delay-ms|/wait-for-file] [/trying-file]`. It
 * waits (a delay, or until the test creates `wait-for-file`), creates `trying-file` if given,
 * connects (retrying), sends one message and exits; stdout gets one JSON line with its timings.
 *
 * Modes: `fuse` (the mount message + one /dev/fuse fd), `two` / `three` (several fds), `none` (no fd), `big`
 * (a payload over the limit + one fd), `file` (one fd of a regular file).
 *
 * @module
 */
import { sendWithFds } from "../../src/sys/fd_passing.ts";
import { cstr, libc, O_CLOEXEC, O_RDONLY } from "../../src/sys/libc.ts";
import { closeFd, openFuse } from "../../src/sys/mount.ts";
import { connectUnix } from "../../src/sys/unix_socket.ts";
import { encodeMountMessage, MAX_MOUNT_MESSAGE_BYTES } from "../../src/mppod/mount_message.ts";

/** The message every mode except `big` sends. */
export const PEER_MESSAGE = {
  bucketName: "demo-bucket",
  args: ["--allow-other", "--read-only", "--region=us-east-1"],
  env: ["AWS_REGION=us-east-1", "HOME=/tmp"],
  volumeId: "vol-1",
};

function openFile(path: string): number {
  const fd = libc().open(cstr(path), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) throw new Error(`open ${path} failed`);
  return fd;
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

async function main(path: string, mode: string, wait: string, trying: string): Promise<void> {
  if (wait.startsWith("/")) {
    // Start only once the test says so (it creates the file), however long that takes.
    while (!(await exists(wait))) await new Promise((r) => setTimeout(r, 10));
  } else if (Number(wait) > 0) await new Promise((r) => setTimeout(r, Number(wait)));
  // Tell the test the first connect attempt is about to happen.
  if (trying) await Deno.writeTextFile(trying, "");
  const t0 = performance.now();
  const conn = await connectUnix(path, { timeoutMs: 10_000 });
  const connectedMs = performance.now() - t0;
  let bytes = encodeMountMessage(PEER_MESSAGE);
  let fds: number[];
  switch (mode) {
    case "fuse":
      fds = [openFuse()];
      break;
    case "two":
      fds = [openFuse(), openFuse()];
      break;
    case "three":
      fds = [openFuse(), openFuse(), openFuse()];
      break;
    case "none":
      fds = [];
      break;
    case "big":
      bytes = new Uint8Array(MAX_MOUNT_MESSAGE_BYTES + 100).fill(0x20);
      fds = [openFuse()];
      break;
    case "file":
      fds = [openFile("/etc/hostname")];
      break;
    default:
      throw new Error(`Unknown mode "${mode}"`);
  }
  await sendWithFds(conn, bytes, fds, { timeoutMs: 5000 });
  conn.close();
  for (const fd of fds) closeFd(fd);
  const out = {
    connectedMs,
    totalMs: performance.now() - t0,
    bytes: bytes.length,
    fds: fds.length,
  };
  await Deno.stdout.write(new TextEncoder().encode(`${JSON.stringify(out)}\n`));
}

if (import.meta.main) {
  const [path, mode, wait, trying] = Deno.args;
  if (!path || !mode) {
    throw new Error("usage: _fd_peer.ts <socket> <mode> [delay-ms|/wait-for-file] [/trying-file]");
  }
  await main(path, mode, wait ?? "0", trying ?? "");
}
