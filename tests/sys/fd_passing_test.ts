/**
 * fd passing between two real Deno processes over our nonblocking unix sockets: this process
 * listens and receives (like the mounter), `_fd_peer.ts` connects and sends (like the node plugin).
 */
import assert from "node:assert/strict";
import { isErrno, SysError } from "../../src/sys/errno.ts";
import {
  FdPassingError,
  receiveWithFds,
  sendWithFd,
  sendWithFds,
} from "../../src/sys/fd_passing.ts";
import { closeFd, fdTarget, isCloexec, isFuseDevice, openFuse } from "../../src/sys/mount.ts";
import {
  accept,
  connectUnix,
  listenUnix,
  peerCredentials,
  SocketClosedError,
  UnixSocketPathError,
} from "../../src/sys/unix_socket.ts";
import { MAX_MOUNT_MESSAGE_BYTES, parseMountMessage } from "../../src/mppod/mount_message.ts";
import { TimeoutError } from "../../src/util/errors.ts";
import {
  openFdCount,
  privilegedTest,
  rootSkipReason,
  setprivSkipReason,
  statusWithin,
  tempDir,
} from "../testbed/harness/sys_helpers.ts";
import { PEER_MESSAGE } from "./_fd_peer.ts";
import { exists, waitFor } from "../_helpers.ts";

const ROOT = rootSkipReason();
const PEER = new URL("./_fd_peer.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const RECEIVE = { maxBytes: MAX_MOUNT_MESSAGE_BYTES, timeoutMs: 10_000 };

/** Start the peer; `wait` is a delay in ms or a file to wait for; `trying` a file it creates. */
function spawnPeer(
  socket: string,
  mode: string,
  wait: number | string = 0,
  trying = "",
): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", CONFIG, PEER, socket, mode, String(wait), trying],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
}

async function peerResult(child: Deno.ChildProcess): Promise<Record<string, number>> {
  const [out, status] = await Promise.all([
    new Response(child.stdout).text(),
    statusWithin(child, 20_000),
  ]);
  assert.equal(status.code, 0, "peer exits 0");
  return JSON.parse(out);
}

function measure(what: string, value: number): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`  [measure] ${what}: ${value.toFixed(2)}\n`));
}

privilegedTest(
  "receiveWithFds() gets one /dev/fuse fd from another process; the event loop keeps running",
  ROOT,
  async () => {
    await using dir = await tempDir("fdpass");
    const sock = `${dir.path}/mount.sock`;
    using listener = await listenUnix(sock, { mode: 0o600 });
    // The peer connects only once this process's event loop has run 100 timer ticks (≥ 1 s,
    // two poll slices) while accept() waits: if the waits blocked the event loop, the go file
    // would never appear and accept() would time out.
    const go = `${dir.path}/go`;
    let ticks = 0;
    const timer = setInterval(() => {
      if (++ticks === 100) Deno.writeTextFileSync(go, "");
    }, 10);
    const t0 = performance.now();
    const child = spawnPeer(sock, "fuse", go);
    try {
      using conn = await accept(listener, { timeoutMs: 20_000 });
      assert.deepEqual(peerCredentials(conn).uid, 0);
      assert.equal(peerCredentials(conn).pid, child.pid);
      const { bytes, fds } = await receiveWithFds(conn, { ...RECEIVE, exactFds: 1 });
      const waited = performance.now() - t0;
      try {
        assert.equal(fds.length, 1);
        assert.equal(fdTarget(fds[0]!), "/dev/fuse");
        assert.equal(isFuseDevice(fds[0]!), true);
        assert.equal(isCloexec(fds[0]!), true, "MSG_CMSG_CLOEXEC applied");
        assert.deepEqual(parseMountMessage(bytes), PEER_MESSAGE);
      } finally {
        fds.forEach(closeFd);
      }
      measure("waited ms for the peer process", waited);
      measure("timer ticks during the wait", ticks);
      assert.ok(ticks >= 100, `the event loop ran while accept() waited: ${ticks} ticks`);
      const peer = await peerResult(child);
      measure("peer connect ms", peer.connectedMs!);
    } finally {
      clearInterval(timer);
      await statusWithin(child, 20_000).catch(() => {});
    }
  },
);

privilegedTest("connectUnix() retries until the listener appears", ROOT, async () => {
  await using dir = await tempDir("late");
  const sock = `${dir.path}/mount.sock`;
  const trying = `${dir.path}/trying`;
  const child = spawnPeer(sock, "fuse", 0, trying);
  try {
    // Listen only once the peer is about to connect: its first attempt finds no socket.
    await waitFor("the peer to start connecting", () => exists(trying), { timeoutMs: 30_000 });
    using listener = await listenUnix(sock);
    using conn = await accept(listener, { timeoutMs: 20_000 });
    const { fds } = await receiveWithFds(conn, { ...RECEIVE, exactFds: 1 });
    fds.forEach(closeFd);
    const peer = await peerResult(child);
    measure("peer connect ms (started before the listener)", peer.connectedMs!);
    assert.equal(peer.fds, 1, "the peer connected after retrying and sent its fd");
  } finally {
    await statusWithin(child, 20_000).catch(() => {});
  }
});

privilegedTest(
  "receiveWithFds() refuses bad messages and closes the received fds",
  ROOT,
  async (t) => {
    await using dir = await tempDir("reject");
    const cases: { mode: string; problem: string }[] = [
      { mode: "two", problem: "fd-count" },
      { mode: "none", problem: "fd-count" },
      { mode: "three", problem: "fd-count" },
      { mode: "big", problem: "too-large" },
    ];
    for (const c of cases) {
      await t.step(c.mode, async () => {
        const sock = `${dir.path}/${c.mode}.sock`;
        using listener = await listenUnix(sock);
        const before = await openFdCount();
        const child = spawnPeer(sock, c.mode);
        try {
          using conn = await accept(listener, { timeoutMs: 20_000 });
          await peerResult(child); // the whole message is queued before we read
          await assert.rejects(
            receiveWithFds(conn, { ...RECEIVE, exactFds: 1 }),
            (e: unknown) => e instanceof FdPassingError && e.problem === c.problem,
          );
        } finally {
          await statusWithin(child, 20_000).catch(() => {});
        }
        assert.equal(await openFdCount(), before, "no fd leaked");
      });
    }

    await t.step("more fds than room: control-truncated", async () => {
      const sock = `${dir.path}/trunc.sock`;
      using listener = await listenUnix(sock);
      const before = await openFdCount();
      const child = spawnPeer(sock, "three");
      try {
        using conn = await accept(listener, { timeoutMs: 20_000 });
        await peerResult(child);
        await assert.rejects(
          receiveWithFds(conn, { ...RECEIVE, maxFds: 1 }),
          (e: unknown) => e instanceof FdPassingError && e.problem === "control-truncated",
        );
      } finally {
        await statusWithin(child, 20_000).catch(() => {});
      }
      assert.equal(await openFdCount(), before, "no fd leaked");
    });

    await t.step(
      "a regular file fd is received; fdTarget() lets the caller refuse it",
      async () => {
        const sock = `${dir.path}/file.sock`;
        using listener = await listenUnix(sock);
        const child = spawnPeer(sock, "file");
        try {
          using conn = await accept(listener, { timeoutMs: 20_000 });
          const { fds } = await receiveWithFds(conn, { ...RECEIVE, exactFds: 1 });
          await peerResult(child);
          try {
            assert.notEqual(fdTarget(fds[0]!), "/dev/fuse");
            assert.equal(isFuseDevice(fds[0]!), false);
            assert.equal(fdTarget(fds[0]!), await Deno.realPath("/etc/hostname"));
          } finally {
            fds.forEach(closeFd);
          }
        } finally {
          await statusWithin(child, 20_000).catch(() => {});
        }
      },
    );
  },
);

privilegedTest(
  "accept() reports and can refuse a peer with another uid",
  setprivSkipReason(),
  async () => {
    await using dir = await tempDir("uid");
    const sock = `${dir.path}/mount.sock`;
    using listener = await listenUnix(sock, { mode: 0o777 });
    const denoDir = `${dir.path}/deno`;
    await Deno.mkdir(denoDir, { mode: 0o777 });
    await Deno.chmod(denoDir, 0o777);
    const nobody = () =>
      new Deno.Command("setpriv", {
        args: [
          "--reuid=65534",
          "--regid=65534",
          "--clear-groups",
          "env",
          `DENO_DIR=${denoDir}`,
          `HOME=${denoDir}`,
          Deno.execPath(),
          "eval",
          "--no-config",
          `const c = await Deno.connect({ transport: "unix", path: ${JSON.stringify(sock)} });
         await c.write(new TextEncoder().encode("hi")).catch(() => {});
         await new Promise((r) => setTimeout(r, 500));
         c.close();`,
        ],
        stdin: "null",
        stdout: "null",
        stderr: "inherit",
      }).spawn();

    let child = nobody();
    try {
      using conn = await accept(listener, { timeoutMs: 20_000 });
      assert.deepEqual(
        { uid: peerCredentials(conn).uid, gid: peerCredentials(conn).gid },
        { uid: 65534, gid: 65534 },
      );
    } finally {
      await statusWithin(child, 20_000).catch(() => {});
    }

    child = nobody();
    try {
      await assert.rejects(accept(listener, { timeoutMs: 2000, allowUids: [0] }), TimeoutError);
    } finally {
      await statusWithin(child, 20_000).catch(() => {});
    }
  },
);

privilegedTest(
  "connectUnix() honours its timeout and keeps the last error as cause",
  ROOT,
  async () => {
    await using dir = await tempDir("ctimeout");
    const t0 = performance.now();
    const err = await connectUnix(`${dir.path}/missing.sock`, { timeoutMs: 200 }).catch((e) => e);
    const elapsed = performance.now() - t0;
    assert.ok(err instanceof TimeoutError, String(err));
    assert.ok(err.cause instanceof SysError && err.cause.code === "ENOENT");
    // It waited its timeout (a timer never fires early); how much longer depends on the load.
    assert.ok(elapsed >= 195, `elapsed ${elapsed}`);
    measure("connect timeout 200 ms took", elapsed);
  },
);

privilegedTest("accept(), receiveWithFds() and connectUnix() stop on abort", ROOT, async () => {
  await using dir = await tempDir("abort");
  const sock = `${dir.path}/mount.sock`;
  using listener = await listenUnix(sock);
  const reason = new Error("cancelled by test");
  const abortAfter = (ms: number) => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(reason), ms);
    return ac.signal;
  };

  // Each wait is rejected with the abort reason, not with its (10 s) TimeoutError: the abort
  // ended it.
  await assert.rejects(
    accept(listener, { timeoutMs: 10_000, signal: abortAfter(100) }),
    (e) => e === reason,
  );

  using client = await connectUnix(sock, { timeoutMs: 1000 });
  using server = await accept(listener, { timeoutMs: 1000 });
  await assert.rejects(
    receiveWithFds(server, { ...RECEIVE, signal: abortAfter(100) }),
    (e) => e === reason,
  );
  void client;

  await assert.rejects(
    connectUnix(`${dir.path}/missing.sock`, { timeoutMs: 10_000, signal: abortAfter(100) }),
    (e) => e === reason,
  );

  const aborted = AbortSignal.abort(reason);
  await assert.rejects(accept(listener, { timeoutMs: 1000, signal: aborted }), (e) => e === reason);
});

privilegedTest("receiveWithFds() times out when the peer sends nothing", ROOT, async () => {
  await using dir = await tempDir("rtimeout");
  const sock = `${dir.path}/mount.sock`;
  using listener = await listenUnix(sock);
  using _client = await connectUnix(sock, { timeoutMs: 1000 });
  using server = await accept(listener, { timeoutMs: 1000 });
  const t0 = performance.now();
  await assert.rejects(receiveWithFds(server, { ...RECEIVE, timeoutMs: 250 }), TimeoutError);
  const elapsed = performance.now() - t0;
  assert.ok(elapsed >= 245, `elapsed ${elapsed}`);
});

privilegedTest(
  "sendWithFd() to a closed peer fails with EPIPE instead of killing the process",
  ROOT,
  async () => {
    await using dir = await tempDir("epipe");
    const sock = `${dir.path}/mount.sock`;
    using listener = await listenUnix(sock);
    using client = await connectUnix(sock, { timeoutMs: 1000 });
    const server = await accept(listener, { timeoutMs: 1000 });
    server.close();
    const fd = openFuse();
    try {
      await assert.rejects(
        sendWithFd(client, new Uint8Array([1, 2, 3]), fd, { timeoutMs: 1000 }),
        (e) => isErrno(e, "EPIPE", "ECONNRESET"),
      );
    } finally {
      closeFd(fd);
    }
  },
);

privilegedTest(
  "listenUnix() replaces a stale socket, refuses other files and long paths",
  ROOT,
  async () => {
    await using dir = await tempDir("listen");
    const sock = `${dir.path}/mount.sock`;
    const first = await listenUnix(sock, { mode: 0o600 });
    first.close(); // leaves the socket file behind, as a crashed mounter would
    assert.ok((await Deno.lstat(sock)).isSocket);
    using second = await listenUnix(sock, { mode: 0o600 });
    assert.equal((await Deno.lstat(sock)).mode! & 0o777, 0o600);
    using _c = await connectUnix(sock, { timeoutMs: 1000 });
    using _s = await accept(second, { timeoutMs: 1000 });

    await Deno.writeTextFile(`${dir.path}/regular`, "x");
    await assert.rejects(listenUnix(`${dir.path}/regular`), UnixSocketPathError);
    await assert.rejects(listenUnix(`${dir.path}/${"x".repeat(120)}`), UnixSocketPathError);
  },
);

privilegedTest(
  "listenUnix() and connectUnix() reach a path longer than sun_path",
  ROOT,
  async () => {
    await using dir = await tempDir("longpath");
    const deep = `${dir.path}/${"d".repeat(60)}/${"e".repeat(60)}`;
    await Deno.mkdir(deep, { recursive: true });
    const sock = `${deep}/mount.sock`;
    assert.ok(new TextEncoder().encode(sock).length > 108);
    using listener = await listenUnix(sock, { mode: 0o600 });
    assert.ok((await Deno.lstat(sock)).isSocket, "the socket file is at the long path");
    const fd = openFuse();
    try {
      const [server, client] = await Promise.all([
        accept(listener, { timeoutMs: 2000 }),
        connectUnix(sock, { timeoutMs: 2000 }),
      ]);
      using _s = server;
      await sendWithFd(client, new Uint8Array([42]), fd, { timeoutMs: 1000 });
      client.close();
      const got = await receiveWithFds(server, { ...RECEIVE, exactFds: 1 });
      assert.deepEqual([...got.bytes], [42]);
      got.fds.forEach(closeFd);
    } finally {
      closeFd(fd);
    }
    // A long path whose directory does not exist yet is retried like a missing socket.
    await assert.rejects(
      connectUnix(`${deep}/nope/${"f".repeat(40)}/m.sock`, { timeoutMs: 100 }),
      TimeoutError,
    );
  },
);

privilegedTest("closing a socket ends the waits on it", ROOT, async () => {
  await using dir = await tempDir("closewait");
  const sock = `${dir.path}/mount.sock`;
  const listener = await listenUnix(sock);
  const pending = accept(listener, { timeoutMs: 10_000 });
  setTimeout(() => listener.close(), 50);
  // SocketClosedError, not the 10 s TimeoutError: the close ended the wait.
  await assert.rejects(pending, SocketClosedError);
  assert.throws(() => listener.fd, SocketClosedError);
});

privilegedTest("in-process connect + send + receive latency", ROOT, async () => {
  await using dir = await tempDir("latency");
  const sock = `${dir.path}/mount.sock`;
  using listener = await listenUnix(sock);
  const payload = new TextEncoder().encode(JSON.stringify(PEER_MESSAGE));
  const fd = openFuse();
  const samples: number[] = [];
  try {
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      const serverSide = accept(listener, { timeoutMs: 2000 }).then(async (conn) => {
        try {
          return await receiveWithFds(conn, { ...RECEIVE, exactFds: 1 });
        } finally {
          conn.close();
        }
      });
      const client = await connectUnix(sock, { timeoutMs: 2000 });
      await sendWithFds(client, payload, [fd], { timeoutMs: 2000 });
      client.close();
      const got = await serverSide;
      samples.push(performance.now() - t0);
      got.fds.forEach(closeFd);
      assert.equal(got.bytes.length, payload.length);
    }
  } finally {
    closeFd(fd);
  }
  samples.sort((a, b) => a - b);
  measure("connect+send+receive median ms (200 rounds)", samples[100]!);
  measure("connect+send+receive p95 ms", samples[190]!);
});
