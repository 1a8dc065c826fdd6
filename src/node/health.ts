/**
 * Is a mount alive? An async `stat` of its root, bounded: a dead FUSE server answers `ENOTCONN`
 * at once; a hung one never answers, which also counts as unhealthy after the timeout.
 *
 * @module
 */
import type { Files } from "../sys/files.ts";
import { errorMessage } from "../util/errors.ts";

/** Result of {@link checkMountHealth}. */
export type MountHealth = { readonly ok: true } | { readonly ok: false; readonly problem: string };

/** Stat `path` within `timeoutMs`. */
export async function checkMountHealth(
  files: Files,
  path: string,
  timeoutMs: number,
): Promise<MountHealth> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stat = files.stat(path);
  try {
    const result = await Promise.race([
      stat.then((s) => (s ? "ok" : "missing")),
      new Promise<"hung">((resolve) => (timer = setTimeout(() => resolve("hung"), timeoutMs))),
    ]);
    if (result === "ok") return { ok: true };
    if (result === "missing") return { ok: false, problem: `"${path}" does not exist` };
    stat.catch(() => {});
    return { ok: false, problem: `"${path}" did not answer within ${timeoutMs} ms (hung)` };
  } catch (err) {
    return { ok: false, problem: errorMessage(err) };
  } finally {
    clearTimeout(timer);
  }
}
