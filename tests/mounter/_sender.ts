/**
 * A hostile or confused peer of the mounter, for the mounter's process tests:
 * `deno run -A _sender.ts <socket> <payload-file> <fuse|file|two|none>` connects, sends the file's
 * bytes with the chosen fds in one message, and closes. Prints `sent` or the error.
 *
 * @module
 */
import { sendWithFds } from "../../src/sys/fd_passing.ts";
import { closeFd, openFuse } from "../../src/sys/mount.ts";
import { connectUnix } from "../../src/sys/unix_socket.ts";

async function main(socket: string, payloadFile: string, fdKind: string): Promise<void> {
  const bytes = await Deno.readFile(payloadFile);
  const fds: number[] = [];
  const files: Deno.FsFile[] = [];
  if (fdKind === "fuse" || fdKind === "two") fds.push(openFuse());
  if (fdKind === "file" || fdKind === "two") {
    const f = await Deno.open(payloadFile);
    files.push(f);
    // Deno exposes no fd numbers; /proc/self/fd lists the newest open file last.
    // deno-lint-ignore no-sync-fn-in-async-fn
    const entries = [...Deno.readDirSync("/proc/self/fd")].map((e) => Number(e.name)).sort((a, b) =>
      a - b
    );
    const fd = entries.findLast((n) => {
      try {
        return Deno.readLinkSync(`/proc/self/fd/${n}`) === Deno.realPathSync(payloadFile);
      } catch {
        return false;
      }
    });
    if (fd === undefined) throw new Error("could not find the file's fd");
    fds.push(fd);
  }
  using conn = await connectUnix(socket, { timeoutMs: 20_000 });
  try {
    await sendWithFds(conn, bytes, fds, { timeoutMs: 10_000 });
    await Deno.stdout.write(new TextEncoder().encode("sent\n"));
  } catch (err) {
    await Deno.stdout.write(new TextEncoder().encode(`error: ${String(err)}\n`));
  } finally {
    if (fdKind === "fuse" || fdKind === "two") closeFd(fds[0]!);
    for (const f of files) f.close();
  }
}

if (import.meta.main) {
  const [socket, payload, kind] = Deno.args;
  if (!socket || !payload || !kind) throw new Error("usage: _sender.ts <socket> <payload> <kind>");
  await main(socket, payload, kind);
}
