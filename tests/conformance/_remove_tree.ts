/**
 * The tier's only recursive removal. It removes a directory the tier made itself and refuses
 * anything else: the path must be absolute and normalized, sit directly in the expected parent
 * with the expected name prefix, be a real directory reached without a symlink, and have no mount
 * point at or below it. The walk never follows a symlink (they are unlinked) and stops with an
 * error at a directory of another file system (a mount that appeared meanwhile) instead of
 * entering it.
 *
 * @module
 */
import { basename, dirname, normalize } from "node:path";
import { readMountInfo } from "../../src/sys/mountinfo.ts";

/** Where a removable tree must be. */
export interface TreeOwner {
  /** The directory the tree was made in (absolute). */
  readonly parent: string;
  /** The start of the tree's own name (e.g. the `Deno.makeTempDir` prefix). */
  readonly namePrefix: string;
}

/** A removal refused by a guard; nothing was removed. */
export class RefusedRemoval extends Error {
  override readonly name = "RefusedRemoval";
}

/**
 * Remove `path` and everything in it, after the checks above. Resolves without doing anything
 * when `path` does not exist; throws {@link RefusedRemoval} when a guard fails.
 */
export async function removeOwnTree(path: string, owner: TreeOwner): Promise<void> {
  const parent = owner.parent.replace(/\/+$/, "");
  if (
    !path.startsWith("/") || normalize(path) !== path || !parent.startsWith("/") ||
    normalize(parent) !== parent || parent === "" || dirname(path) !== parent ||
    !owner.namePrefix || !basename(path).startsWith(owner.namePrefix)
  ) {
    throw new RefusedRemoval(
      `refusing to remove "${path}": not a "${owner.namePrefix}*" directory directly in "${parent}"`,
    );
  }
  let top: Deno.FileInfo;
  try {
    top = await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  if (!top.isDirectory || top.isSymlink) {
    throw new RefusedRemoval(`refusing to remove "${path}": not a directory`);
  }
  // Mount points are real paths: a path reached through a symlinked parent is refused.
  const real = await Deno.realPath(path);
  if (real !== path) {
    throw new RefusedRemoval(`refusing to remove "${path}": it resolves to "${real}"`);
  }
  const mounted = (await readMountInfo()).map((m) => m.mountPoint).filter((m) =>
    m === path || m.startsWith(`${path}/`)
  );
  if (mounted.length > 0) {
    throw new RefusedRemoval(
      `refusing to remove "${path}": mount points inside: ${mounted.join(", ")}`,
    );
  }
  await removeWithin(path, top.dev);
}

async function removeWithin(dir: string, dev: number): Promise<void> {
  for await (const e of Deno.readDir(dir)) {
    const p = `${dir}/${e.name}`;
    const st = await Deno.lstat(p);
    if (st.isDirectory && !st.isSymlink) {
      if (st.dev !== dev) {
        throw new RefusedRemoval(`refusing to remove "${p}": another file system is mounted there`);
      }
      await removeWithin(p, dev);
    } else {
      await Deno.remove(p); // a file, socket or symlink: unlink, never follow
    }
  }
  await Deno.remove(dir);
}
