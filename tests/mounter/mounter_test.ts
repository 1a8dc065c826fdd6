/**
 * The mounter binary as uid 1000 (as in a Mountpoint Pod) against bad peers and bad messages: each
 * is refused with a clear reason in `mount.error` (wrong peer uid: refused and logged), the
 * mounter keeps waiting, nothing is mounted, and `mount.exit` ends it with 0. Run as root.
 */
import assert from "node:assert/strict";
import { ENTRYPOINTS, runToEnd, waitFor } from "../_helpers.ts";
import { MP_UID, nodeTest, startMounter } from "../testbed/harness/node_harness.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";

const SENDER = new URL("./_sender.ts", import.meta.url).pathname;

interface Case {
  readonly name: string;
  readonly payload: string | Uint8Array;
  readonly fds: "fuse" | "file" | "two" | "none";
  readonly error: RegExp;
  readonly asUid?: number;
}

const ok = { bucketName: "bucket-1", args: ["--allow-delete"], env: ["AWS_REGION=us-east-1"] };
const CASES: Case[] = [
  {
    name: "oversized message",
    payload: new Uint8Array(70 * 1024).fill(0x20),
    fds: "fuse",
    error: /Message is larger than 65536 bytes/,
  },
  { name: "malformed JSON", payload: "{not json", fds: "fuse", error: /not valid UTF-8 JSON/ },
  {
    name: "non-FUSE fd",
    payload: JSON.stringify(ok),
    fds: "file",
    error: /received fd refers to ".*payload.json", not the FUSE device \/dev\/fuse/,
  },
  {
    name: "two fds",
    payload: JSON.stringify(ok),
    fds: "two",
    error: /Expected 1 fd\(s\), received 2/,
  },
  {
    name: "no fd",
    payload: JSON.stringify(ok),
    fds: "none",
    error: /Expected 1 fd\(s\), received 0/,
  },
  {
    name: "unknown field",
    payload: JSON.stringify({ ...ok, command: "rm -rf /" }),
    fds: "fuse",
    error: /unknown fields: command/,
  },
  {
    name: "option rclone cannot honour",
    payload: JSON.stringify({
      ...ok,
      engine: "rclone",
      args: ["--allow-delete", "--allow-overwrite", "--maximum-throughput-gbps=10"],
    }),
    fds: "fuse",
    error: /The rclone engine cannot honour the mount option "maximum-throughput-gbps=10"/,
  },
  {
    name: "rclone volume without allow-overwrite",
    payload: JSON.stringify({ ...ok, engine: "rclone" }),
    fds: "fuse",
    error: /The rclone engine cannot refuse overwrites .* use the mount-s3 engine/,
  },
  {
    name: "bad bucket name",
    payload: JSON.stringify({ ...ok, bucketName: "../../etc" }),
    fds: "fuse",
    error: /"bucketName" is missing or not a valid bucket name/,
  },
];

nodeTest(
  `mounter refuses ${CASES.length + 1} bad peers/messages and exits 0 on mount.exit`,
  async (t) => {
    const dir = await Deno.makeTempDir({ dir: "/tmp", prefix: "m" });
    await Deno.chmod(dir, 0o755);
    const comm = `${dir}/comm`;
    await Deno.mkdir(comm, { mode: 0o770 });
    await Deno.chown(comm, MP_UID, MP_UID);
    const payload = `${dir}/payload.json`;
    const mounter = startMounter(comm);
    try {
      await waitFor(
        "the mounter socket",
        () => Deno.stat(`${comm}/mount.sock`).then(() => true, () => false),
        { timeoutMs: 60_000 },
      );
      const send = async (c: Case) => {
        await Deno.writeFile(
          payload,
          typeof c.payload === "string" ? new TextEncoder().encode(c.payload) : c.payload,
        );
        await Deno.chmod(payload, 0o644);
        const args = ["run", "-A", "--quiet", SENDER, `${comm}/mount.sock`, payload, c.fds];
        return c.asUid === undefined
          ? await runToEnd(Deno.execPath(), args, {
            PATH: Deno.env.get("PATH") ?? "",
            HOME: "/root",
          })
          : await runToEnd("setpriv", [
            `--reuid=${c.asUid}`,
            `--regid=${c.asUid}`,
            "--clear-groups",
            Deno.execPath(),
            ...args,
          ], { PATH: Deno.env.get("PATH") ?? "", HOME: "/tmp" });
      };
      for (const c of CASES) {
        await t.step(c.name, async () => {
          await Deno.remove(`${comm}/mount.error`).catch(() => {});
          const r = await send(c);
          assert.equal(r.code, 0, r.stderr);
          const text = await waitFor(
            "mount.error",
            () => Deno.readTextFile(`${comm}/mount.error`).catch(() => ""),
          );
          assert.match(text, /^Refused a mount message: /);
          assert.match(text, c.error);
          assert.equal(
            (await readMountInfo()).filter((m) => m.mountPoint.startsWith(dir)).length,
            0,
          );
          const children = await runToEnd("pgrep", ["-P", String(mounter.child.pid)]);
          assert.equal(children.stdout.trim(), "", "no engine was started");
        });
      }
      await t.step("peer that is not root (uid 1000)", async () => {
        await Deno.remove(`${comm}/mount.error`).catch(() => {});
        const r = await send({
          name: "uid",
          payload: JSON.stringify(ok),
          fds: "none",
          error: /x/,
          asUid: MP_UID,
        });
        assert.equal(r.code, 0, r.stderr);
        await waitFor(
          "the refusal in the log",
          () => /Refused a connection on .* from uid 1000/.test(mounter.stderr()),
        );
        assert.equal(
          await Deno.stat(`${comm}/mount.error`).then(() => true, () => false),
          false,
        );
      });
      await Deno.writeTextFile(`${comm}/mount.exit`, "");
      // A connection wakes the accept loop, which then sees mount.exit.
      await send({ name: "wake", payload: "{}", fds: "none", error: /x/ });
      const code = await mounter.stop("SIGCONT", 20_000);
      assert.equal(code, 0, mounter.stderr().slice(-2000));
    } finally {
      await mounter.stop("SIGKILL").catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
);

nodeTest("mounter --help runs as uid 1000 from source", async () => {
  const r = await runToEnd("setpriv", [
    `--reuid=${MP_UID}`,
    `--regid=${MP_UID}`,
    "--clear-groups",
    Deno.execPath(),
    "run",
    "-A",
    "--quiet",
    ENTRYPOINTS.mounter,
    "--help",
  ], { PATH: Deno.env.get("PATH") ?? "", HOME: "/tmp" });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /--comm-dir/);
});
