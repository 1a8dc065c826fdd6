/**
 * Is a mount alive? An async `stat` of its root, then an open of it, bounded: a dead FUSE server
 * answers `ENOTCONN`; a hung one never answers, which also counts as unhealthy after the timeout.
 *
 * The `stat` alone is not enough: the kernel answers it from its attribute cache, so a mount whose
 * engine was killed still "stats" fine for as long as the engine's attribute timeout (seen: a
 * republish right after the engine was killed returned "already published" and repaired nothing).
 * Opening the directory is always a round trip to the FUSE server (`OPENDIR`), and a cheap one: no
 * listing, no S3 request.
 *
 * @module
 */
import { type Files, RealFiles } from "../sys/files.ts";
import { errorMessage } from "../util/errors.ts";

/** Result of {@link checkMountHealth}. */
export type MountHealth = { readonly ok: true } | { readonly ok: false; readonly problem: string };

/** Open and close a directory: one round trip to its FUSE server. */
export async function openDirRoundTrip(path: string): Promise<void> {
  const dir = await Deno.open(path, { read: true });
  dir.close();
}

/**
 * Stat `path`, then open it (`roundTrip`), within `timeoutMs`. The round trip defaults to
 * {@link openDirRoundTrip} on the real file system and to none on fakes.
 */
export async function checkMountHealth(
  files: Files,
  path: string,
  timeoutMs: number,
  roundTrip: ((path: string) => Promise<void>) | undefined = files instanceof RealFiles
    ? openDirRoundTrip
    : undefined,
): Promise<MountHealth> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = files.stat(path).then(async (s) => {
    if (!s) return "missing" as const;
    if (s.isDirectory) await roundTrip?.(path);
    return "ok" as const;
  });
  try {
    const result = await Promise.race([
      check,
      new Promise<"hung">((resolve) => (timer = setTimeout(() => resolve("hung"), timeoutMs))),
    ]);
    if (result === "ok") return { ok: true };
    if (result === "missing") return { ok: false, problem: `"${path}" does not exist` };
    check.catch(() => {});
    return { ok: false, problem: `"${path}" did not answer within ${timeoutMs} ms (hung)` };
  } catch (err) {
    return { ok: false, problem: errorMessage(err) };
  } finally {
    clearTimeout(timer);
  }
}
