/**
 * A mounter that is not listening yet: `deno run -A _bound_socket.ts <path>` binds a unix socket
 * at `<path>` without `listen(2)`, so connections are refused (ECONNREFUSED), and sleeps.
 *
 * @module
 */
import { AF_UNIX, check, libc, SOCK_CLOEXEC, SOCK_STREAM } from "../../src/sys/libc.ts";
import { sockaddrUn } from "../../src/sys/unix_socket.ts";

if (import.meta.main) {
  const path = Deno.args[0]!;
  const fd = check(libc().socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket");
  const { addr, length } = sockaddrUn(path);
  check(libc().bind(fd, addr, length), "bind", path);
  await new Promise(() => {});
}
