/**
 * The guards of the conformance tier's recursive removal (`_remove_tree.ts`). Needs write access
 * to the temp dir; the mount case needs root and is skipped with its reason otherwise.
 */
import assert from "node:assert/strict";
import { RefusedRemoval, removeOwnTree } from "./_remove_tree.ts";

const PREFIX = "s3csi-rmtree-test-";

async function scratch(): Promise<{ path: string; parent: string }> {
  const path = await Deno.makeTempDir({ prefix: PREFIX });
  return { path, parent: path.slice(0, path.lastIndexOf("/")) };
}

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

Deno.test("removeOwnTree() removes its own tree and unlinks symlinks without following them", async () => {
  const outside = await scratch();
  const own = await scratch();
  try {
    await Deno.writeTextFile(`${outside.path}/keep`, "x");
    await Deno.mkdir(`${own.path}/a/b`, { recursive: true });
    await Deno.writeTextFile(`${own.path}/a/b/f`, "y");
    await Deno.symlink(outside.path, `${own.path}/a/link`);
    await removeOwnTree(own.path, { parent: own.parent, namePrefix: PREFIX });
    assert.equal(await exists(own.path), false);
    assert.equal(await Deno.readTextFile(`${outside.path}/keep`), "x");
    // Gone already: nothing to do.
    await removeOwnTree(own.path, { parent: own.parent, namePrefix: PREFIX });
  } finally {
    await Deno.remove(`${outside.path}/keep`).catch(() => {});
    await Deno.remove(outside.path).catch(() => {});
  }
});

Deno.test("removeOwnTree() refuses paths that are not its own tree", async () => {
  const own = await scratch();
  try {
    await Deno.writeTextFile(`${own.path}/f`, "x");
    const refused = (p: string, parent = own.parent, namePrefix = PREFIX) =>
      assert.rejects(removeOwnTree(p, { parent, namePrefix }), RefusedRemoval);
    await refused("/");
    await refused("");
    await refused(own.parent);
    await refused(own.path.slice(1)); // relative
    await refused(`${own.path}/../${own.path.split("/").at(-1)}`); // not normalized
    await refused(own.path, own.parent, "other-"); // wrong name
    await refused(own.path, "/", PREFIX); // wrong parent
    await refused(own.path, own.parent, ""); // no prefix
    const link = `${own.parent}/${PREFIX}link-${crypto.randomUUID().slice(0, 8)}`;
    await Deno.symlink(own.path, link);
    try {
      await refused(link); // a symlink to a tree
    } finally {
      await Deno.remove(link);
    }
    assert.equal(await Deno.readTextFile(`${own.path}/f`), "x");
  } finally {
    await Deno.remove(`${own.path}/f`).catch(() => {});
    await Deno.remove(own.path).catch(() => {});
  }
});

const rootReason = Deno.uid() === 0 ? undefined : "needs root (mounts a tmpfs)";
Deno.test({
  name: `removeOwnTree() refuses a tree with a mount point inside${
    rootReason ? ` (skipped: ${rootReason})` : ""
  }`,
  ignore: rootReason !== undefined,
  async fn() {
    const own = await scratch();
    const mnt = `${own.path}/m`;
    await Deno.mkdir(mnt);
    const mount = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=1m", "s3csi-rmtree-test", mnt],
    }).output();
    assert.equal(mount.code, 0, new TextDecoder().decode(mount.stderr));
    try {
      await Deno.writeTextFile(`${mnt}/inside`, "x");
      await assert.rejects(
        removeOwnTree(own.path, { parent: own.parent, namePrefix: PREFIX }),
        /mount points inside/,
      );
      assert.equal(await Deno.readTextFile(`${mnt}/inside`), "x");
    } finally {
      await new Deno.Command("umount", { args: [mnt] }).output();
    }
    await removeOwnTree(own.path, { parent: own.parent, namePrefix: PREFIX });
    assert.equal(await exists(own.path), false);
  },
});

Deno.test("removeOwnTree() tolerates entries that vanish or appear while it walks", async () => {
  const own = await scratch();
  await Deno.mkdir(`${own.path}/comm`);
  for (const f of ["a", "b", ".mount.exit.tmp-1"]) {
    await Deno.writeTextFile(`${own.path}/comm/${f}`, "x");
  }
  let appeared = false;
  await removeOwnTree(own.path, { parent: own.parent, namePrefix: PREFIX }, async (p) => {
    // As the node plugin does: the temp file is renamed away just before the walk reaches it, and
    // a new file appears in the dir once, after the walk listed it.
    if (p.endsWith("/.mount.exit.tmp-1")) await Deno.rename(p, `${own.path}/comm/mount.exit`);
    if (!appeared && p.endsWith("/comm/a")) {
      appeared = true;
      await Deno.writeTextFile(`${own.path}/comm/.mount.exit.tmp-2`, "x");
    }
  });
  assert.equal(await exists(own.path), false);
});
