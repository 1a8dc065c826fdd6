import assert from "node:assert/strict";
import {
  MOUNTER_EXIT_ENGINE_FAILED,
  MOUNTER_EXIT_NO_MESSAGE,
  MOUNTER_EXIT_OK,
} from "../mppod/exit_codes.ts";
import { encodeMountMessage } from "../mppod/mount_message.ts";
import { FakeFiles } from "../sys/fake_files.ts";
import { SysError } from "../sys/errno.ts";
import { ExecCalled, FakeSys } from "../sys/fake_sys.ts";
import type { ExitStatus, ProcessSpawner, SpawnedProcess, SpawnSpec } from "../sys/process.ts";
import { Mounter } from "./mounter.ts";

const COMM = "/comm";

class FakeSpawner implements ProcessSpawner {
  readonly spawned: SpawnSpec[] = [];
  onExit!: (s: ExitStatus) => void;
  killed: string[] = [];
  constructor(readonly onPath: string[] = ["rclone", "s3-csi-supervisor"]) {}
  lookPath(name: string): Promise<string | undefined> {
    return Promise.resolve(this.onPath.includes(name) ? `/usr/bin/${name}` : undefined);
  }
  spawn(spec: SpawnSpec): SpawnedProcess {
    this.spawned.push(spec);
    const status = new Promise<ExitStatus>((r) => (this.onExit = r));
    return {
      pid: 99,
      status,
      kill: (s) => this.killed.push(s),
      stderrTail: () => "engine said: boom",
    };
  }
}

function setup(spawner = new FakeSpawner(), receiveTimeoutMs = 2000, drainGraceMs = 0) {
  const sys = new FakeSys();
  const files = new FakeFiles();
  files.addDir(COMM);
  const mounter = new Mounter({
    sys,
    files,
    spawner,
    commDir: COMM,
    workDir: "/work/run-1",
    sessionDir: "/work/session",
    receiveTimeoutMs,
    engine: "auto",
    messageTimeoutMs: 200,
    drainGraceMs,
  });
  /** The run ends in the exec of the supervisor: what it would have run. */
  const exec = (running: Promise<number>) =>
    running.then(
      (code) => assert.fail(`no exec: the mounter returned ${code}`),
      (e: unknown) => (e instanceof ExecCalled ? e : Promise.reject(e)),
    );
  return { sys, files, spawner, mounter, exec };
}

async function send(sys: FakeSys, bytes: Uint8Array, fd: number): Promise<void> {
  const conn = await sys.connectUnix(`${COMM}/mount.sock`, { timeoutMs: 1000 });
  await sys.sendWithFd(conn, bytes, fd, { timeoutMs: 1000 });
  conn.close();
}

async function until(check: () => unknown): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
}

const MSG = encodeMountMessage({
  bucketName: "bucket-1",
  args: ["--allow-other", "--read-only"],
  env: ["AWS_REGION=us-east-1"],
});

Deno.test("Mounter hands the fd over to the supervisor, which runs the engine on /dev/fd/N", async () => {
  const { sys, files, mounter, exec } = setup(undefined, 2000, 30_000);
  const running = mounter.run(new AbortController().signal);
  const sent = sys.openFuse();
  await send(sys, MSG, sent);
  const e = await exec(running);
  assert.equal(e.path, "/usr/bin/s3-csi-supervisor");
  const fd = Number(/--fuse-fd=(\d+)/.exec(e.argv.join(" "))![1]);
  assert.deepEqual(e.inheritedFds, [fd], "only the FUSE fd reaches the supervisor and the engine");
  const engine = e.argv.slice(e.argv.indexOf("--") + 1);
  assert.equal(engine[0], "/usr/bin/rclone");
  assert.equal(engine[3], `/dev/fd/${fd}`);
  assert.ok(engine.includes("--read-only"));
  assert.deepEqual(e.argv.slice(1, e.argv.indexOf("--")), [
    `--comm-dir=${COMM}`,
    `--fuse-fd=${fd}`,
    "--drain-grace-ms=30000",
  ], "rclone cannot resume a session: no --resumable");
  assert.equal(e.env.HOME, "/work/run-1");
  assert.equal(files.files.has(`${COMM}/mount.sock`), false, "the socket is gone before the exec");
});

Deno.test("Mounter with a session: mount-s3 is resumable, its table in the work volume", async (t) => {
  for (const resume of [false, true]) {
    await t.step(resume ? "resume" : "first start", async () => {
      const { sys, mounter, exec } = setup(new FakeSpawner(["mount-s3", "s3-csi-supervisor"]));
      const running = mounter.run(new AbortController().signal);
      const id = "0123456789abcdef0123456789abcdef";
      await send(
        sys,
        encodeMountMessage({
          protocolVersion: 2,
          bucketName: "bucket-1",
          args: [],
          env: [],
          engine: "mount-s3",
          session: { id, resume },
        }),
        sys.openFuse(),
      );
      const e = await exec(running);
      const flags = e.argv.slice(1, e.argv.indexOf("--"));
      assert.ok(flags.includes("--resumable"));
      assert.equal(flags.includes("--resume"), resume);
      const engine = e.argv.slice(e.argv.indexOf("--") + 1);
      assert.equal(engine[0], "/usr/bin/mount-s3");
      assert.ok(engine.includes("--session-dir=/work/session"));
      assert.ok(engine.includes(`--session-id=${id}`));
      assert.ok(!engine.includes("--resume"), "the supervisor adds --resume itself");
    });
  }
});

Deno.test("Mounter reports an exec that fails and closes the fd", async () => {
  const { sys, files, mounter } = setup();
  sys.failNext("execReplace", new SysError(2, "execve", { path: "/usr/bin/s3-csi-supervisor" }));
  const running = mounter.run(new AbortController().signal);
  const fd = sys.openFuse();
  await send(sys, MSG, fd);
  assert.equal(await running, MOUNTER_EXIT_ENGINE_FAILED);
  assert.match(
    files.files.get(`${COMM}/mount.error`)!.data,
    /Could not start \/usr\/bin\/s3-csi-supervisor for rclone: .*ENOENT/,
  );
  assert.deepEqual(
    [...sys.fds.keys()],
    [fd],
    "the received copy is closed (the sender keeps its own)",
  );
});

Deno.test("Mounter refuses bad messages and keeps waiting", async (t) => {
  const { sys, files, mounter, exec } = setup();
  const running = mounter.run(new AbortController().signal);
  const cases: [string, Uint8Array, number, RegExp][] = [
    [
      "not FUSE",
      MSG,
      sys.addFd("/etc/passwd"),
      /refers to "\/etc\/passwd", not the FUSE device \/dev\/fuse/,
    ],
    [
      "named /dev/fuse, not the device",
      MSG,
      sys.addFd("/dev/fuse", { fuseDevice: false }),
      /refers to "\/dev\/fuse", not the FUSE device/,
    ],
    ["bad JSON", new TextEncoder().encode("{"), sys.openFuse(), /not valid UTF-8 JSON/],
    ["too big", new Uint8Array(70_000), sys.openFuse(), /larger than 65536/],
    [
      "untranslatable",
      encodeMountMessage({ bucketName: "b-1", args: ["--maximum-throughput-gbps=1"], env: [] }),
      sys.openFuse(),
      /The rclone engine cannot honour the mount option "maximum-throughput-gbps=1"/,
    ],
  ];
  for (const [name, bytes, fd, re] of cases) {
    await t.step(name, async () => {
      await files.remove(`${COMM}/mount.error`);
      await send(sys, bytes, fd);
      await until(() => files.files.get(`${COMM}/mount.error`));
      assert.match(files.files.get(`${COMM}/mount.error`)!.data, re);
    });
  }
  assert.equal(sys.callsOf("execReplace").length, 0);
  await send(sys, MSG, sys.openFuse());
  await exec(running);
});

Deno.test("Mounter accepts the FUSE device whatever path its fd shows (sender in a chroot)", async () => {
  const { sys, files, mounter, exec } = setup();
  const running = mounter.run(new AbortController().signal);
  await send(sys, MSG, sys.addFd("/var/tmp/fresh-root/dev/fuse", { fuseDevice: true }));
  await exec(running);
  assert.equal(files.files.get(`${COMM}/mount.error`), undefined);
});

Deno.test("Mounter ignores non-root peers and times out without a message", async () => {
  const { sys, files, mounter } = setup(new FakeSpawner(), 100);
  const running = mounter.run(new AbortController().signal);
  sys.connectCredentials = { pid: 7, uid: 1000, gid: 1000 };
  await send(sys, MSG, sys.openFuse()).catch(() => {});
  assert.equal(await running, MOUNTER_EXIT_NO_MESSAGE);
  assert.equal(sys.callsOf("execReplace").length, 0);
  assert.match(files.files.get(`${COMM}/mount.error`)!.data, /No mount message arrived/);
});

Deno.test("Mounter prefers mount-s3 when it is on PATH", async () => {
  const { sys, mounter, exec } = setup(
    new FakeSpawner(["mount-s3", "rclone", "s3-csi-supervisor"]),
  );
  const running = mounter.run(new AbortController().signal);
  await send(sys, MSG, sys.openFuse());
  const engine = (await exec(running)).argv;
  assert.equal(engine[engine.indexOf("--") + 1], "/usr/bin/mount-s3");
  assert.ok(engine.includes("--foreground"));
  assert.ok(!engine.includes("--resumable"), "a protocol-1 message has no session");
});

Deno.test("Mounter without the supervisor in its image refuses the mount, saying so", async () => {
  const { sys, files, mounter } = setup(new FakeSpawner(["rclone"]));
  const running = mounter.run(new AbortController().signal);
  await send(sys, MSG, sys.openFuse());
  await until(() => files.files.get(`${COMM}/mount.error`));
  assert.match(
    files.files.get(`${COMM}/mount.error`)!.data,
    /s3-csi-supervisor is not installed in this Mountpoint Pod image/,
  );
  await files.writeFile(`${COMM}/mount.exit`, "");
  assert.equal(await running, MOUNTER_EXIT_OK);
});

Deno.test("Mounter refuses to resume what cannot be resumed", async () => {
  const { sys, files, mounter } = setup();
  const running = mounter.run(new AbortController().signal);
  const v2 = (engine: "rclone" | "mount-s3") =>
    encodeMountMessage({
      protocolVersion: 2,
      bucketName: "bucket-1",
      args: ["--allow-delete", "--allow-overwrite"],
      env: [],
      engine,
      session: { id: "0123456789abcdef0123456789abcdef", resume: true },
    });
  await send(sys, v2("rclone"), sys.openFuse());
  await until(() => files.files.get(`${COMM}/mount.error`));
  assert.match(files.files.get(`${COMM}/mount.error`)!.data, /resume a session of rclone/);
  await files.writeFile(`${COMM}/mount.exit`, "");
  assert.equal(await running, MOUNTER_EXIT_OK);
  assert.equal(sys.callsOf("execReplace").length, 0);
});

Deno.test("Mounter waiting for a message exits 0 soon after mount.exit appears", async () => {
  const { files, spawner, mounter } = setup(new FakeSpawner(), 60_000);
  const started = performance.now();
  const running = mounter.run(new AbortController().signal);
  await new Promise((r) => setTimeout(r, 50));
  await files.writeFile(`${COMM}/mount.exit`, "");
  assert.equal(await running, MOUNTER_EXIT_OK);
  assert.ok(performance.now() - started < 5000, "does not wait out the receive timeout");
  assert.equal(spawner.spawned.length, 0);
});
