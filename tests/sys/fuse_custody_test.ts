/**
 * The kernel facts the custody of FUSE connections is built on, checked on this kernel
 * (`_fuse_custody_probe.c`, a FUSE server of a few lines, built here with the C compiler): a
 * server dies with one request read and not answered, and a second one serves the same
 * connection without INIT.
 *
 * - custody keeps the mounting file open and the new server asks for `FUSE_NOTIFY_RESEND`: the
 *   request in flight is delivered again and answered — the caller (a READ or a LOOKUP) sees no
 *   error. This is the design the driver uses (the supervisor and the node plugin keep the
 *   engine's own file; a restarted engine sends RESEND before it reads).
 * - each server serves its own `FUSE_DEV_IOC_CLONE` while custody holds the original: the dead
 *   server's clone is released and its request ends with ECONNABORTED — a LOOKUP in flight fails
 *   (a page-cache READ is retried by the kernel). Measured to choose the design above.
 *
 * @module
 */
import assert from "node:assert/strict";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { runToEnd, testOrSkip } from "../_helpers.ts";
import { rootSkipReason } from "../testbed/harness/sys_helpers.ts";

const SOURCE = new URL("./_fuse_custody_probe.c", import.meta.url).pathname;

function reason(): string | undefined {
  const root = rootSkipReason();
  if (root) return root;
  try {
    new Deno.Command("cc", { args: ["--version"], stdout: "null", stderr: "null" }).outputSync();
  } catch {
    return "needs a C compiler (cc) to build the FUSE probe";
  }
  return undefined;
}

testOrSkip(reason(), {
  name:
    "kernel: a restarted FUSE server answers the requests the dead one read (RESEND), not a clone",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const dir = await Deno.makeTempDir({ prefix: "s3csi-fuse-probe-" });
    const bin = `${dir}/probe`;
    const mnt = `${dir}/mnt`;
    await Deno.mkdir(mnt);
    try {
      const cc = await runToEnd("cc", ["-O1", "-o", bin, SOURCE]);
      assert.equal(cc.code, 0, cc.stderr);
      const outcome = async (design: string, request: string) => {
        const r = await runToEnd("timeout", ["30", bin, mnt, design, request]);
        const m = /^RESULT (\S+)$/m.exec(r.stdout);
        assert.ok(m, `no result (exit ${r.code}): ${r.stderr.slice(-1500)}`);
        return m[1];
      };
      const cases = [
        ["resend", "read", "ok"],
        ["resend", "lookup", "ok"],
        ["clone", "lookup", "ECONNABORTED"],
        ["clone", "read", "ok"],
      ] as const;
      for (const [design, request, expected] of cases) {
        await t.step(`${design}, a ${request} in flight: ${expected}`, async () => {
          assert.equal(await outcome(design, request), expected);
        });
      }
      assert.ok(!(await readMountInfo()).some((m) => m.mountPoint === mnt), "nothing left mounted");
    } finally {
      await new Deno.Command("umount", { args: ["-l", mnt], stderr: "null" }).output();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
