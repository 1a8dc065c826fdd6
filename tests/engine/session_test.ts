/**
 * Sessions that outlive the engine process, on the real kernel and versitygw: our `mount-s3` run
 * by `s3-csi-supervisor` on a FUSE fd this test mounted (as the node plugin does) and then closed
 * (so the supervisor's custody alone keeps the connection).
 *
 * - the engine is SIGKILLed three times, crashes once (SIGABRT) and hands over once (SIGUSR1)
 *   under a workload that holds a directory as cwd and a file open for reading and writes, reads
 *   and lists in a loop: the workload sees no error, its closed writes are in S3 byte-identical,
 *   the held file reads through byte-identical, and the pause each restart cost is printed;
 * - a write handle open when the engine dies fails with EIO on that handle only;
 * - an engine that keeps dying is given up: `mount.error` says why and every access answers EIO
 *   at once (never a hang) until the volume is unmounted, then the supervisor exits 4.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { spawn, waitFor } from "../_helpers.ts";
import {
  engineBin,
  engineTest,
  fuseReason,
  sha256,
  startVersitygw,
  testBytes,
  versitygwReason,
  withBucket,
} from "../testbed/harness/engine.ts";
import { percentile } from "../_helpers.ts";
import {
  lostWrites,
  pauseAfter,
  startWorkload,
  supervise,
  workloadErrors,
} from "../testbed/harness/engine_session.ts";

const reason = fuseReason() ?? engineBin().reason ?? versitygwReason();

async function objectBytes(s3: S3Client, bucket: string, key: string): Promise<Uint8Array> {
  const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return await r.Body!.transformToByteArray();
}

function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`SESSION ${line}\n`));
}

engineTest(
  "session: SIGKILL ×3, a crash and a handover of mount-s3 under a workload: no error, same bytes",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      const heldBytes = testBytes(6 * 1024 * 1024 + 123, 21);
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "k/a/held.bin", Body: heldBytes }));
      const m = await supervise(server, bucket);
      try {
        const workload = startWorkload(`${m.dir}/k/a`, "held.bin");
        await waitFor("the workload to run", () => m.proc.stdout().includes("mounted"), {
          timeoutMs: 10_000,
        });
        await new Promise((r) => setTimeout(r, 1500));
        const stops: { how: string; at: number }[] = [];
        for (const how of ["SIGKILL", "SIGKILL", "SIGKILL", "SIGABRT", "SIGUSR1"] as const) {
          const pid = await m.enginePid();
          stops.push({ how, at: Date.now() });
          Deno.kill(pid, how);
          // The next engine, then let the workload run on it.
          await waitFor("a new engine", async () => (await m.enginePid()) !== pid, {
            timeoutMs: 30_000,
          });
          await new Promise((r) => setTimeout(r, 1500));
        }
        const r = await workload.stop();
        const at = stops.map((s) => s.at);
        const errs = workloadErrors(r, at);
        assert.deepEqual(errs, [], "the workload saw no error but lost writes");
        report(`writes open at a stop, EIO as documented: ${lostWrites(r, at).length}`);
        const pauses = stops.map((s) => pauseAfter(r, s.at));
        for (const [i, s] of stops.entries()) {
          report(`pause after ${s.how}: ${pauses[i] === undefined ? "none" : `${pauses[i]} ms`}`);
        }
        assert.ok(pauses.every((p) => p !== undefined), "the workload went on after every stop");
        report(`pause p99: ${percentile(pauses as number[], 99)} ms over ${pauses.length} stops`);
        assert.ok(r.iterations > 10, `the workload ran (${r.iterations} iterations)`);
        assert.equal(r.held.bytes, heldBytes.length);
        assert.equal(r.held.sha256, sha256(heldBytes), "the held file read through byte-identical");
        for (const [name, sum] of Object.entries(r.written)) {
          assert.equal(sha256(await objectBytes(s3, bucket, `k/a/${name}`)), sum, name);
        }
        const restarts = (m.proc.stderr().match(/starting it again on the same FUSE connection/g) ??
          []).length;
        assert.equal(restarts, 5, m.proc.stderr().slice(-3000));
        assert.match(m.proc.stdout(), /session resumed, generation 6/);
        assert.ok(
          (await Array.fromAsync(Deno.readDir(m.comm))).some((e) => e.name === "custody.sock"),
          "custody.sock is served",
        );
      } finally {
        const { code, comm } = await m.stop();
        assert.equal(code, 1, "the session ended without mount.exit: restart");
        assert.ok(!comm.includes("custody.sock"), `the exited supervisor left ${comm}`);
      }
    }),
);

engineTest(
  "session: a write open when the engine dies fails with EIO on that handle only",
  reason,
  () =>
    withBucket(startVersitygw, async (server, s3, bucket) => {
      const m = await supervise(server, bucket);
      // The writer is its own process: this test process starts processes and must not hold
      // files on a mount whose engine restarts.
      // Sync calls only: Deno's async file calls work on a dup of the fd and close it after, and
      // every close of a FUSE file is a FLUSH, which makes the engine upload what was written.
      const script = `
        const f = Deno.openSync("${m.dir}/lost.bin", { write: true, create: true });
        f.writeSync(new Uint8Array(1024));
        console.log("open"); await new Promise((r) => setTimeout(r, 3000));
        let write = "ok", sync = "ok";
        try { f.writeSync(new Uint8Array(1024)); } catch (e) { write = String(e); }
        try { f.syncSync(); } catch (e) { sync = String(e); }
        f.close();
        Deno.writeTextFileSync("${m.dir}/kept.txt", "kept");
        console.log(JSON.stringify({ write, sync, kept: Deno.readTextFileSync("${m.dir}/kept.txt") }));`;
      try {
        const writer = spawn(Deno.execPath(), ["eval", script], { env: { PATH: "/usr/bin:/bin" } });
        await waitFor("the writer to open", () => writer.stdout().includes("open"), {
          timeoutMs: 30_000,
        });
        const pid = await m.enginePid();
        Deno.kill(pid, "SIGKILL");
        assert.equal(await writer.child.status.then((s) => s.code), 0, writer.stderr());
        const out = JSON.parse(writer.stdout().trim().split("\n").at(-1)!);
        assert.match(out.write, /Input\/output error|os error 5/, JSON.stringify(out));
        assert.match(out.sync, /Input\/output error|os error 5/, JSON.stringify(out));
        assert.equal(out.kept, "kept", "other files work");
        await assert.rejects(objectBytes(s3, bucket, "lost.bin"), "the lost upload is not in S3");
        assert.equal(new TextDecoder().decode(await objectBytes(s3, bucket, "kept.txt")), "kept");
      } finally {
        await m.stop();
      }
    }),
);

engineTest(
  "session: an engine that keeps dying is given up: mount.error, then EIO at once, never a hang",
  reason,
  () =>
    withBucket(startVersitygw, async (server, _s3, bucket) => {
      const m = await supervise(server, bucket, { maxRestarts: 2 });
      try {
        for (let i = 0; i < 3; i++) {
          const pid = await m.enginePid();
          Deno.kill(pid, "SIGKILL");
          if (i < 2) {
            await waitFor("a new engine", async () => (await m.enginePid()) !== pid, {
              timeoutMs: 30_000,
            });
          }
        }
        const error = await waitFor(
          "mount.error",
          () => Deno.readTextFile(`${m.comm}/mount.error`).catch(() => undefined),
          { timeoutMs: 30_000 },
        );
        assert.match(
          error,
          /mount-s3 was killed by SIGKILL and was not started again: it failed 3 times within 60 s/,
        );
        assert.match(error, /the volume answers EIO until it is mounted again/);
        // A separate process: an access must fail at once with EIO.
        const probe = spawn(Deno.execPath(), [
          "eval",
          `try { Deno.readDirSync("${m.dir}"); console.log("ok") } catch (e) { console.log(String(e)) }`,
        ]);
        const answered = await Promise.race([
          probe.child.status.then(() => true),
          new Promise<boolean>((r) => setTimeout(() => r(false), 10_000)),
        ]);
        if (!answered) await probe.stop("SIGKILL").catch(() => {});
        assert.ok(answered, "the access answered within 10 s");
        assert.match(probe.stdout(), /Input\/output error|os error 5/);
        const { code, comm } = await m.stop();
        assert.equal(code, 4, "after the unmount the supervisor exits 4");
        assert.ok(!comm.includes("custody.sock"), `the exited supervisor left ${comm}`);
      } finally {
        await m.stop();
      }
    }),
);
