/**
 * The tier's only recursive removal. It removes a directory the tier made itself and refuses
 * anything else: the path must be absolute and normalized, sit directly in the expected parent
 * with the expected name prefix, be a real directory reached without a symlink, and have no mount
 * point at or below it. The walk never follows a symlink (they are unlinked) and stops with an
 * error at a directory of another file system (a mount that appeared meanwhile) instead of
 * entering it. Like the kubelet's removal of a pod's dirs (Go's `os.RemoveAll`), it tolerates
 * entries that vanish or appear while it walks: the node plugin may still write to a Mountpoint
 * Pod's comm dir (a `mount.exit` written through a temp file and a rename) while it goes.
 *
 * @module
 */
import { basename, dirname, normalize } from "node:path";
import { isErrno } from "../../src/sys/errno.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";

/** Where a removable tree must be. */
export interface TreeOwner {
  /** The directory the tree was made in (absolute). */
  readonly parent: string;
  /** The start of the tree's own name (e.g. the `Deno.makeTempDir` prefix). */
  readonly namePrefix: string;
}

/** How many times a directory is walked again when entries appeared in it meanwhile. */
const WALKS = 5;

/** For tests: called before each entry is removed (e.g. to make it vanish, or add another). */
export type BeforeRemove = (path: string) => Promise<void> | void;

/** A removal refused by a guard; nothing was removed. */
export class RefusedRemoval extends Error {
  override readonly name = "RefusedRemoval";
}

/**
 * Remove `path` and everything in it, after the checks above. Resolves without doing anything
 * when `path` does not exist; throws {@link RefusedRemoval} when a guard fails.
 */
export async function removeOwnTree(
  path: string,
  owner: TreeOwner,
  beforeRemove?: BeforeRemove,
): Promise<void> {
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
  await removeWithin(path, top.dev, beforeRemove);
}

/** `fn`, with "it is gone already" as success. */
async function unlessGone(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}

async function removeWithin(dir: string, dev: number, beforeRemove?: BeforeRemove): Promise<void> {
  for (let walk = 1;; walk++) {
    const entries = await Array.fromAsync(Deno.readDir(dir)).catch((err) => {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw err;
    });
    if (!entries) return;
    for (const e of entries) {
      const p = `${dir}/${e.name}`;
      await beforeRemove?.(p);
      await unlessGone(async () => {
        const st = await Deno.lstat(p);
        if (st.isDirectory && !st.isSymlink) {
          if (st.dev !== dev) {
            throw new RefusedRemoval(
              `refusing to remove "${p}": another file system is mounted there`,
            );
          }
          await removeWithin(p, dev, beforeRemove);
        } else {
          await Deno.remove(p); // a file, socket or symlink: unlink, never follow
        }
      });
    }
    try {
      await Deno.remove(dir);
      return;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      // Entries appeared meanwhile (ENOTEMPTY): walk it again, a bounded number of times.
      if (walk >= WALKS || !isErrno(err, "ENOTEMPTY")) throw err;
    }
  }
}
