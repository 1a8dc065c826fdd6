/**
 * `execve(2)`: replace this process with another program, keeping its PID and the fds that do
 * not have `FD_CLOEXEC`. The mounter hands itself over to the resident supervisor this way, so the
 * Mountpoint container's PID 1 becomes a small program instead of staying a Deno runtime.
 *
 * @module
 */
import { addressOf, alloc, check, cstr, libc } from "./libc.ts";

/** The NULL-terminated array of C strings `execve` takes, and the buffers it points to. */
function cStringArray(
  values: readonly string[],
): { array: Uint8Array<ArrayBuffer>; keep: unknown[] } {
  const strings = values.map(cstr);
  const array = alloc(8 * (strings.length + 1));
  const view = new DataView(array.buffer);
  strings.forEach((s, i) => view.setBigUint64(8 * i, addressOf(s), true));
  return { array, keep: strings };
}

/**
 * Replace this process with `path` run as `argv` in environment `env`. Returns only on failure.
 * @throws {SysError} why the program could not be started (ENOENT, EACCES, …)
 */
export function execReplace(
  path: string,
  argv: readonly string[],
  env: Readonly<Record<string, string>>,
): never {
  const args = cStringArray(argv);
  const envp = cStringArray(Object.entries(env).map(([k, v]) => `${k}=${v}`));
  check(libc().execve(cstr(path), args.array, envp.array), "execve", path);
  // execve returns only on failure, which check() turned into a throw.
  throw new Error(`execve(${path}) returned`);
}
