/**
 * The mounter's work dir (run as root, like a misconfigured start could be): nothing is touched
 * before the flags and the comm dir are checked; on start only the run dirs an earlier mounter
 * marked are removed — foreign files and directories in the work dir are never deleted — and the
 * mounter's own run dir is removed when it exits.
 */
import assert from "node:assert/strict";
import { ENTRYPOINTS, spawn, waitFor } from "../_helpers.ts";
import { RUN_DIR_MARKER } from "../../src/mounter/run_mounter.ts";
import { nodeTest } from "../testbed/harness/node_harness.ts";

async function names(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) out.push(e.name);
  return out.sort();
}

function mounter(args: string[]) {
  return spawn(Deno.execPath(), [
    "run",
    "-A",
    "--quiet",
    ENTRYPOINTS.mounter,
    "--log-format=text",
    ...args,
  ], {
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: "/tmp" },
  });
}

nodeTest(
  "mounter work dir: a bad start touches nothing; a good one removes only its own earlier run dirs",
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "s3csi-workdir-" });
    try {
      const work = `${dir}/work`;
      await Deno.mkdir(`${work}/run-foreign`, { recursive: true }); // not marked: not ours
      await Deno.writeTextFile(`${work}/run-foreign/data`, "keep");
      await Deno.writeTextFile(`${work}/precious`, "keep");
      await Deno.mkdir(`${work}/run-old`);
      await Deno.writeTextFile(`${work}/run-old/${RUN_DIR_MARKER}`, "");
      const before = await names(work);

      // A missing comm dir: exit 2, the work dir untouched.
      const bad = mounter([`--comm-dir=${dir}/missing`, `--work-dir=${work}`]);
      assert.equal(await bad.child.status.then((s) => s.code), 2);
      assert.deepEqual(await names(work), before);

      // A good start: run-old goes, everything else stays, one new run dir.
      await Deno.mkdir(`${dir}/comm`);
      const good = mounter([
        `--comm-dir=${dir}/comm`,
        `--work-dir=${work}`,
        "--receive-timeout=60s",
      ]);
      await waitFor(
        "the mounter to listen",
        () => Deno.stat(`${dir}/comm/mount.sock`).then(() => true, () => false),
        {
          timeoutMs: 60_000,
        },
      );
      const during = await names(work);
      assert.ok(!during.includes("run-old"), "the marked earlier run dir is removed");
      for (const keep of ["precious", "run-foreign"]) assert.ok(during.includes(keep), keep);
      assert.equal(await Deno.readTextFile(`${work}/run-foreign/data`), "keep");
      const mine = during.filter((n) => n.startsWith("run-") && n !== "run-foreign");
      assert.equal(mine.length, 1);
      await Deno.writeTextFile(`${dir}/comm/mount.exit`, "");
      assert.equal(await good.child.status.then((s) => s.code), 0);
      assert.deepEqual(
        await names(work),
        ["precious", "run-foreign"],
        "its own run dir is removed at exit",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
