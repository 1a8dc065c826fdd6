import assert from "node:assert/strict";
import {
  MOUNTER_EXIT_ENGINE_FAILED,
  MOUNTER_EXIT_NO_MESSAGE,
  MOUNTER_EXIT_OK,
} from "../mppod/exit_codes.ts";
import { encodeMountMessage } from "../mppod/mount_message.ts";
import { FakeFiles } from "../sys/fake_files.ts";
import { FakeSys } from "../sys/fake_sys.ts";
import type { ExitStatus, ProcessSpawner, SpawnedProcess, SpawnSpec } from "../sys/process.ts";
import { Mounter } from "./mounter.ts";

const COMM = "/comm";

class FakeSpawner implements ProcessSpawner {
  readonly spawned: SpawnSpec[] = [];
  onExit!: (s: ExitStatus) => void;
  killed: string[] = [];
  constructor(readonly onPath: string[] = ["rclone"]) {}
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
    workDir: "/tmp/w",
    receiveTimeoutMs,
    engine: "auto",
    messageTimeoutMs: 200,
    drainGraceMs,
  });
  return { sys, files, spawner, mounter };
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

Deno.test("Mounter runs the engine on /dev/fd/N and exits 0 after mount.exit", async () => {
  const { sys, files, spawner, mounter } = setup();
  const running = mounter.run(new AbortController().signal);
  await send(sys, MSG, sys.openFuse());
  await until(() => spawner.spawned.length);
  const spec = spawner.spawned[0]!;
  assert.equal(spec.command, "/usr/bin/rclone");
  const fd = Number(spec.args[2]!.slice("/dev/fd/".length));
  assert.ok(sys.callsOf("clearCloexec").some((c) => c.args[0] === fd));
  assert.ok(sys.callsOf("closeFd").some((c) => c.args[0] === fd), "mounter closes its copy");
  assert.ok(spec.args.includes("--read-only"));
  await files.writeFile(`${COMM}/mount.exit`, "");
  spawner.onExit({ code: 0, signal: null });
  assert.equal(await running, MOUNTER_EXIT_OK);
  assert.equal(files.files.has(`${COMM}/mount.sock`), false);
});

Deno.test("Mounter writes mount.error and exits non-zero when the engine dies", async () => {
  const { sys, files, spawner, mounter } = setup();
  const ac = new AbortController();
  const running = mounter.run(ac.signal);
  await send(sys, MSG, sys.openFuse());
  await until(() => spawner.spawned.length);
  ac.abort();
  assert.deepEqual(spawner.killed, ["SIGTERM"], "signals are forwarded");
  spawner.onExit({ code: 137, signal: "SIGKILL" });
  assert.equal(await running, MOUNTER_EXIT_ENGINE_FAILED);
  assert.match(
    files.files.get(`${COMM}/mount.error`)!.data,
    /rclone was killed by SIGKILL without an unmount request: engine said: boom/,
  );
});

Deno.test("Mounter refuses bad messages and keeps waiting", async (t) => {
  const { sys, files, spawner, mounter } = setup();
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
  assert.equal(spawner.spawned.length, 0);
  await send(sys, MSG, sys.openFuse());
  await until(() => spawner.spawned.length);
  await files.writeFile(`${COMM}/mount.exit`, "");
  spawner.onExit({ code: 0, signal: null });
  assert.equal(await running, MOUNTER_EXIT_OK);
});

Deno.test("Mounter accepts the FUSE device whatever path its fd shows (sender in a chroot)", async () => {
  const { sys, files, spawner, mounter } = setup();
  const running = mounter.run(new AbortController().signal);
  await send(sys, MSG, sys.addFd("/var/tmp/fresh-root/dev/fuse", { fuseDevice: true }));
  await until(() => spawner.spawned.length);
  assert.equal(files.files.get(`${COMM}/mount.error`), undefined);
  await files.writeFile(`${COMM}/mount.exit`, "");
  spawner.onExit({ code: 0, signal: null });
  assert.equal(await running, MOUNTER_EXIT_OK);
});

Deno.test("Mounter ignores non-root peers and times out without a message", async () => {
  const { sys, files, spawner, mounter } = setup(new FakeSpawner(), 100);
  const running = mounter.run(new AbortController().signal);
  sys.connectCredentials = { pid: 7, uid: 1000, gid: 1000 };
  await send(sys, MSG, sys.openFuse()).catch(() => {});
  assert.equal(await running, MOUNTER_EXIT_NO_MESSAGE);
  assert.equal(spawner.spawned.length, 0);
  assert.match(files.files.get(`${COMM}/mount.error`)!.data, /No mount message arrived/);
});

Deno.test("Mounter prefers mount-s3 when it is on PATH", async () => {
  const { sys, files, spawner, mounter } = setup(new FakeSpawner(["mount-s3", "rclone"]));
  const running = mounter.run(new AbortController().signal);
  await send(sys, MSG, sys.openFuse());
  await until(() => spawner.spawned.length);
  assert.equal(spawner.spawned[0]!.command, "/usr/bin/mount-s3");
  assert.ok(spawner.spawned[0]!.args.includes("--foreground"));
  await files.writeFile(`${COMM}/mount.exit`, "");
  spawner.onExit({ code: 0, signal: null });
  assert.equal(await running, MOUNTER_EXIT_OK);
});

Deno.test("Mounter keeps serving after SIGTERM during the drain grace until the node asks for the exit", async () => {
  const { sys, files, spawner, mounter } = setup(new FakeSpawner(), 2000, 5000);
  const ac = new AbortController();
  const running = mounter.run(ac.signal);
  await send(sys, MSG, sys.openFuse());
  await until(() => spawner.spawned.length);
  ac.abort();
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(spawner.killed, [], "workloads still use the mount: the engine keeps running");
  await files.writeFile(`${COMM}/mount.exit`, "");
  await until(() => spawner.killed.length);
  assert.deepEqual(spawner.killed, ["SIGTERM"], "stopped once the node plugin asked for the exit");
  spawner.onExit({ code: 0, signal: null });
  assert.equal(await running, MOUNTER_EXIT_OK);
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
