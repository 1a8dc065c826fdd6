/**
 * A hostile Mountpoint Pod's mounter, run as uid 1000 like the real one:
 * `deno run -A _hostile_mounter.ts <comm-dir> <plant>`. It takes the node plugin's mount message
 * and FUSE fd like the real mounter, but never serves the mount (the node's readiness wait hangs)
 * and instead plants `mount.error` as `<plant>`:
 *
 * - `link:<path>`  a symbolic link to `<path>` (a host file, `/dev/zero`, another pod's file);
 * - `fifo`         a FIFO nobody writes;
 * - `huge:<MiB>`   a regular file of that size whose last line is `HOSTILE-TAIL`;
 * - `swap`         swaps among all of the above as fast as it can until killed;
 * - `stall:<bin>`  serves every FUSE fd it is given with `<bin>` (`_stall_fuse.c`: answers INIT and
 *                  GETATTR, never OPENDIR) and keeps accepting new mount messages, as a pod whose
 *                  mount the node plugin remounts again and again.
 *
 * Prints `received` on stdout once it holds the fd, then runs until killed.
 *
 * @module
 */
import { receiveWithFds } from "../../src/sys/fd_passing.ts";
import { clearCloexec, closeFd } from "../../src/sys/mount.ts";
import { accept, listenUnix } from "../../src/sys/unix_socket.ts";
import { MAX_MOUNT_MESSAGE_BYTES } from "../../src/mppod/mount_message.ts";

async function plant(comm: string, how: string, n: number): Promise<void> {
  const tmp = `${comm}/.plant-${n}`;
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
  if (how.startsWith("link:")) {
    await Deno.symlink(how.slice(5), tmp);
  } else if (how === "fifo") {
    const r = await new Deno.Command("mkfifo", { args: [tmp] }).output();
    if (!r.success) throw new Error("mkfifo failed");
  } else if (how.startsWith("huge:")) {
    const f = await Deno.open(tmp, { write: true, create: true });
    await f.truncate(Number(how.slice(5)) * 1024 * 1024);
    await f.seek(0, Deno.SeekMode.End);
    await f.write(new TextEncoder().encode("\nHOSTILE-TAIL\n"));
    f.close();
  } else if (how === "dir") {
    await Deno.mkdir(tmp);
  }
  await Deno.rename(tmp, `${comm}/mount.error`).catch(async () => {
    // rename onto a directory fails: clear it first
    await Deno.remove(`${comm}/mount.error`, { recursive: true }).catch(() => {});
    await Deno.rename(tmp, `${comm}/mount.error`).catch(() => {});
  });
}

/** `stall:<bin>`: serve each fd received with the stalling server, accept the next. */
async function stall(comm: string, bin: string): Promise<never> {
  using listener = await listenUnix(`${comm}/mount.sock`, { mode: 0o600 });
  for (let n = 0;; n++) {
    const conn = await accept(listener, { timeoutMs: 600_000, allowUids: [0] });
    const { fds } = await receiveWithFds(conn, {
      maxBytes: MAX_MOUNT_MESSAGE_BYTES,
      timeoutMs: 10_000,
      exactFds: 1,
    });
    conn.close();
    clearCloexec(fds[0]!);
    new Deno.Command(bin, { args: [String(fds[0])], stdin: "null" }).spawn();
    closeFd(fds[0]!);
    await Deno.stdout.write(new TextEncoder().encode(`received ${n}\n`));
  }
}

async function main(comm: string, how: string): Promise<void> {
  if (how.startsWith("stall:")) await stall(comm, how.slice("stall:".length));
  using listener = await listenUnix(`${comm}/mount.sock`, { mode: 0o600 });
  const conn = await accept(listener, { timeoutMs: 120_000, allowUids: [0] });
  const { fds } = await receiveWithFds(conn, {
    maxBytes: MAX_MOUNT_MESSAGE_BYTES,
    timeoutMs: 10_000,
    exactFds: 1,
  });
  conn.close();
  void fds; // held, never served: the FUSE mount does not answer
  await Deno.stdout.write(new TextEncoder().encode("received\n"));
  if (how !== "swap") {
    await plant(comm, how, 0);
    await new Promise(() => {});
  }
  const kinds = ["link:/etc/shadow", "fifo", "link:/dev/zero", "huge:8", "dir"];
  for (let i = 0;; i++) await plant(comm, kinds[i % kinds.length]!, i).catch(() => {});
}

if (import.meta.main) {
  const [comm, how] = Deno.args;
  if (!comm || !how) throw new Error("usage: _hostile_mounter.ts <comm-dir> <plant>");
  await main(comm, how);
}
