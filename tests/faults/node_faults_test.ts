/**
 * Node-level fault injection on the real kernel (FUSE), real S3 (RGW; versitygw for mount-s3) and
 * the real binaries (root):
 *
 * 1. the FUSE engine is SIGKILLed while a workload reads, then while one writes:
 *    - rclone on RGW (it cannot resume a session): the workload gets an error (no hang),
 *      NodeGetVolumeStats reports abnormal, the mounter exits non-zero with `mount.error`; after
 *      the mounter restarts a republish repairs the volume (and a republish that arrives before the
 *      restart waits for the new mounter);
 *    - our mount-s3 on versitygw (ADR 0012): the supervisor starts a new engine on the same
 *      connection, which resumes the session: the reader reads to the end without an error, the
 *      writer's open file fails with EIO (its upload died with the engine), the volume stays
 *      healthy on the same mount, and nothing is reported in `mount.error`;
 * 2. the mounter itself (PID 1 of its PID namespace, as in its container) is SIGKILLed while a
 *    workload writes and another reads: same detection and recovery, the republish arriving
 *    before the container restarts;
 * 3. the node plugin is SIGKILLed while a NodePublishVolume waits for its Mountpoint Pod, then
 *    while one waits for the mounter's socket (source already mounted); after a restart the retried
 *    publishes succeed with one source mount each, nothing leaked, and another pod's mount keeps
 *    working across both restarts.
 *
 * In all of them, files closed before the fault are in S3 afterwards (checked through the S3 API),
 * and nothing is left at the end: no mount under the kubelet root, no engine process, no bucket.
 * Figures (time to detect, time to repair) are printed as `FAULT …` lines.
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import { PODS } from "../../src/kube/resources.ts";
import { CREDENTIALS_DIR, hostCommDir } from "../../src/mppod/paths.ts";
import { findMount, readMountInfo } from "../../src/sys/mountinfo.ts";
import { exists, type Running, runToEnd, waitFor } from "../_helpers.ts";
import {
  type Harness,
  kubeletMkdirParent,
  mountpointPodObject,
  MP_UID,
  type MpPod,
  startMounter,
} from "../testbed/harness/node_harness.ts";
import {
  assertInS3,
  faultTest,
  publishInChild,
  putObject,
  report,
  sha256,
  slowReader,
  slowWriter,
  startNsMounter,
  waitExit,
  waitProgress,
  writeClosedFiles,
} from "../testbed/harness/node_faults.ts";

/** What a workload sees when its FUSE server is gone. */
const WORKLOAD_ERROR = /Transport endpoint is not connected|Input\/output error|connection abort/i;
const BIG = 48 << 20;

async function enginePid(mounterPid: number, engine = "rclone"): Promise<number> {
  return await waitFor(`the ${engine} process`, async () => {
    const r = await runToEnd("pgrep", ["-P", String(mounterPid), "-x", engine]);
    return Number(r.stdout.trim().split("\n")[0]) || undefined;
  }, { timeoutMs: 20_000 });
}

async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return await Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function publishVolume(h: Harness, mp: MpPod, pv: string, uid: string): Promise<string> {
  await h.assign(pv, `vol-${pv}`, mp.name, [uid]);
  const t = h.target(uid, pv);
  await kubeletMkdirParent(t);
  await h.csi.node.nodePublishVolume(h.publishRequest(uid, pv));
  return t;
}

async function assertAbnormal(h: Harness, pv: string, target: string): Promise<string> {
  const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: `vol-${pv}`, volumePath: target });
  assert.equal(stats.volumeCondition?.abnormal, true, JSON.stringify(stats));
  return stats.volumeCondition?.message ?? "";
}

/**
 * The republish arrives before the Mountpoint Pod's container has restarted (kubelet's restart
 * back-off): it must wait for the new mounter's socket and then succeed. The container restarts
 * once the node plugin has taken the republish in hand — it detaches the dead target first, so
 * the target leaves the mount table — not after a guessed delay.
 */
async function republishThenRestart(
  h: Harness,
  pv: string,
  uid: string,
  restart: () => Promise<void>,
): Promise<void> {
  const target = h.target(uid, pv);
  assert.ok(findMount(await readMountInfo(), target), "the dead target is still mounted");
  const publishing = h.csi.node.nodePublishVolume(h.publishRequest(uid, pv));
  let settled = false;
  publishing.then(() => settled = true, () => settled = true);
  await waitFor(
    "the node plugin to detach the dead target (the republish is in hand)",
    async () => {
      // A publish that ended early (e.g. an error) is reported as such, not as a timeout.
      if (settled) {
        await publishing;
        throw new Error("the republish returned before the mounter restarted");
      }
      return !findMount(await readMountInfo(), target);
    },
    { timeoutMs: 30_000, intervalMs: 20 },
  );
  await restart();
  await bounded(publishing, 40_000, "the republish waiting for the restarted mounter");
}

/** Republish, then the volume is healthy with one source + one bind, and the files read back. */
async function assertRepaired(
  h: Harness,
  pv: string,
  uid: string,
  closed: Map<string, string>,
): Promise<void> {
  const t = h.target(uid, pv);
  await h.csi.node.nodePublishVolume(h.publishRequest(uid, pv));
  const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: `vol-${pv}`, volumePath: t });
  assert.equal(stats.volumeCondition?.abnormal, false, stats.volumeCondition?.message ?? "");
  for (const [name, sum] of closed) {
    assert.equal(await sha256(await Deno.readFile(`${t}/${name}`)), sum, `${name} reads back`);
  }
  const mounts = await readMountInfo();
  const target = findMount(mounts, t)!;
  const same = mounts.filter((m) => m.majorMinor === target.majorMinor);
  assert.equal(same.length, 2, "one new source and one bind");
  const dead = mounts.filter((m) => m.fsType === "fuse" && m.mountPoint.startsWith(h.root));
  assert.equal(dead.length, 2, `the dead mounts are gone: ${dead.map((m) => m.mountPoint)}`);
}

for (const [engine, s3] of [["rclone", "rgw"]] as const) {
  faultTest(
    `engine (${engine} on ${s3}) killed during reads, then during writes: workload error, abnormal stats, mount.error, republish repairs, closed files in S3`,
    async (h, children) => {
      assert.equal(h.defaultEngine, engine);
      const mp = await h.mountpointPod("mp-engine");
      const pv = "pv-e";
      const t = await publishVolume(h, mp, pv, "uid-e");
      await putObject(h.s3, h.bucket, "big.bin", BIG);
      let seed = 1;
      for (const phase of ["read", "write"] as const) {
        const closed = await writeClosedFiles(t, {
          [`${phase}-small.txt`]: 1000,
          [`${phase}-3m.bin`]: 3 << 20,
          [`${phase}-9m.bin`]: 9 << 20,
        }, seed++);
        const w = children.add(
          phase === "read" ? slowReader(`${t}/big.bin`) : slowWriter(`${t}/${phase}-open.bin`),
        );
        await waitProgress(w, 3, `the ${phase}r`);
        const pid = await enginePid(mp.mounter.child.pid, engine);
        const killedAt = performance.now();
        Deno.kill(pid, "SIGKILL");
        const exit = await waitExit(w, 20_000);
        assert.notEqual(exit.code, 0, `the ${phase}r fails`);
        assert.match(exit.stderr, WORKLOAD_ERROR);
        const status = await bounded(mp.mounter.child.status, 20_000, "the mounter to exit");
        assert.notEqual(status.code, 0, "the mounter exits non-zero so its container restarts");
        assert.match(
          await Deno.readTextFile(`${mp.commDir}/mount.error`),
          new RegExp(`${engine} was killed by SIGKILL`),
        );
        // Even while the kernel still has the root's attributes cached (stat succeeds).
        const message = await assertAbnormal(h, pv, t);
        assert.match(message, /does not answer.*not connected/);
        const detectMs = Math.round(performance.now() - killedAt);
        await assertInS3(h.s3, h.bucket, closed);

        const r0 = performance.now();
        if (phase === "read") await h.restartMounter(mp);
        else {
          // Not h.restartMounter: it waits for mount.sock, which the waiting publish takes (and the
          // mounter removes) within milliseconds.
          await republishThenRestart(h, pv, "uid-e", async () => {
            await mp.mounter.stop("SIGKILL").catch(() => {});
            mp.mounter = startMounter(mp.commDir);
          });
        }
        await assertRepaired(h, pv, "uid-e", closed);
        const repairMs = Math.round(performance.now() - r0);
        report(
          `${engine}-kill-during-${phase}: workload exit ${exit.code} after ${exit.ms} ms ("${
            exit.stderr.split("\n").at(-1)
          }"); mounter exit ${status.code}; stats abnormal ${detectMs} ms after the kill; ${
            phase === "read"
              ? "mounter restart then republish"
              : "republish (before the mounter restart)"
          } ${repairMs} ms; ${closed.size} closed files in S3`,
        );
      }
    },
    { s3 },
  );
}

faultTest(
  "engine (mount-s3 on versitygw) killed during reads, then during writes: the reader goes on, the open write gets EIO, the mount stays, closed files in S3",
  async (h, children) => {
    assert.equal(h.defaultEngine, "mount-s3");
    const mp = await h.mountpointPod("mp-engine");
    const pv = "pv-e";
    const t = await publishVolume(h, mp, pv, "uid-e");
    await putObject(h.s3, h.bucket, "big.bin", BIG);
    const mountsBefore = (await readMountInfo()).filter((m) => m.mountPoint.startsWith(h.root))
      .map((m) => m.majorMinor);
    let seed = 11;
    for (const phase of ["read", "write"] as const) {
      const closed = await writeClosedFiles(t, {
        [`${phase}-small.txt`]: 1000,
        [`${phase}-3m.bin`]: 3 << 20,
      }, seed++);
      const w = children.add(
        phase === "read" ? slowReader(`${t}/big.bin`) : slowWriter(`${t}/${phase}-open.bin`),
      );
      await waitProgress(w, 3, `the ${phase}r`);
      const pid = await enginePid(mp.mounter.child.pid, "mount-s3");
      Deno.kill(pid, "SIGKILL");
      const next = await enginePid(mp.mounter.child.pid, "mount-s3").then(async (p) =>
        p === pid
          ? await waitFor("a new engine", async () => {
            const q = await enginePid(mp.mounter.child.pid, "mount-s3");
            return q !== pid ? q : undefined;
          })
          : p
      );
      if (phase === "read") {
        const exit = await waitExit(w, 60_000);
        assert.equal(exit.code, 0, `the reader reads to the end without an error: ${exit.stderr}`);
        assert.equal(
          w.stdout().split("\n").filter(Boolean).reduce((n, l) => n + Number(l), 0),
          BIG,
          "every byte of big.bin was read",
        );
      } else {
        const exit = await waitExit(w, 20_000);
        assert.notEqual(exit.code, 0, "the writer's open file is lost");
        assert.match(exit.stderr, /Input\/output error/);
      }
      assert.equal(
        await Promise.race([mp.mounter.child.status.then(() => true), Promise.resolve(false)]),
        false,
        "the mounter (the supervisor) keeps running",
      );
      assert.equal(await exists(`${mp.commDir}/mount.error`), false, "nothing to report");
      const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: `vol-${pv}`, volumePath: t });
      assert.equal(stats.volumeCondition?.abnormal, false, stats.volumeCondition?.message ?? "");
      await assertInS3(h.s3, h.bucket, closed);
      report(`mount-s3-kill-during-${phase}: engine ${pid} → ${next}, resumed on the same mount`);
    }
    assert.deepEqual(
      (await readMountInfo()).filter((m) => m.mountPoint.startsWith(h.root)).map((m) =>
        m.majorMinor
      ),
      mountsBefore,
      "the same mounts: never made again",
    );
  },
  { s3: "versitygw" },
);

faultTest(
  "mounter killed (PID 1 of its container) during reads and writes: same detection and recovery",
  async (h, children) => {
    const mp = await h.mountpointPod("mp-mounter");
    // Play the container: the mounter as PID 1 of a PID namespace, whose death kills the engine.
    await mp.mounter.stop("SIGTERM");
    let ns = await startNsMounter(mp.commDir);
    mp.mounter = children.add(ns.running);
    const pv = "pv-m";
    const t = await publishVolume(h, mp, pv, "uid-m");
    await putObject(h.s3, h.bucket, "big.bin", BIG);
    const closed = await writeClosedFiles(t, { "m-small.txt": 1000, "m-9m.bin": 9 << 20 }, 3);
    const reader = children.add(slowReader(`${t}/big.bin`));
    const writer = children.add(slowWriter(`${t}/m-open.bin`));
    await waitProgress(reader, 3, "the reader");
    await waitProgress(writer, 3, "the writer");
    const engine = await enginePid(ns.innerPid);

    const killedAt = performance.now();
    Deno.kill(ns.innerPid, "SIGKILL");
    const [r, w] = await Promise.all([waitExit(reader, 20_000), waitExit(writer, 20_000)]);
    for (const [who, e] of [["reader", r], ["writer", w]] as const) {
      assert.notEqual(e.code, 0, `the ${who} fails`);
      assert.match(e.stderr, WORKLOAD_ERROR, who);
    }
    const status = await bounded(ns.running.child.status, 20_000, "the container to end");
    assert.notEqual(status.code, 0, "the container ends non-zero");
    assert.equal(await exists(`/proc/${engine}`), false, "the engine died with its mounter");
    const message = await assertAbnormal(h, pv, t);
    assert.match(message, /does not answer.*not connected/);
    const detectMs = Math.round(performance.now() - killedAt);
    await assertInS3(h.s3, h.bucket, closed);

    const r0 = performance.now();
    // The republish comes first, then the container restarts (its stale mount.sock is replaced).
    await republishThenRestart(h, pv, "uid-m", async () => {
      ns = await startNsMounter(mp.commDir, { waitSocket: false });
      mp.mounter = children.add(ns.running);
    });
    await assertRepaired(h, pv, "uid-m", closed);
    const repairMs = Math.round(performance.now() - r0);
    report(
      `mounter-kill: reader exit ${r.code} after ${r.ms} ms ("${
        r.stderr.split("\n").at(-1)
      }"), writer exit ${w.code} after ${w.ms} ms ("${
        w.stderr.split("\n").at(-1)
      }"); stats abnormal ${detectMs} ms after the kill; republish (before the container restart) ${repairMs} ms; ${closed.size} closed files in S3`,
    );
  },
);

/** A Mountpoint Pod not started yet: its API object (Pending) and its comm dir. */
type PendingPod = Omit<MpPod, "mounter">;

/** A Mountpoint Pod object (Pending) with its comm dir, and no mounter yet. */
async function pendingMountpointPod(h: Harness, name: string): Promise<PendingPod> {
  const created = await h.kube.create<KubeObject>(
    PODS,
    mountpointPodObject(name, [{ name: "comm", emptyDir: { medium: "Memory" } }]),
  );
  const uid = created.metadata!.uid!;
  const commDir = hostCommDir(h.root, uid);
  await Deno.mkdir(commDir, { recursive: true, mode: 0o755 });
  await Deno.chmod(commDir, 0o2770);
  await Deno.chown(commDir, MP_UID, MP_UID);
  return { name, uid, commDir };
}

async function setRunning(h: Harness, name: string): Promise<void> {
  const fresh = await h.kube.get<KubeObject>(PODS, name, "mount-s3");
  await h.kube.update(PODS, { ...fresh!, status: { phase: "Running" } }, {
    subresource: "status",
  });
}

/** Start the mounter of a pending pod (the container starts); the harness stops it at the end. */
async function startPodMounter(
  h: Harness,
  pending: PendingPod,
  children: { add(r: Running): Running },
): Promise<void> {
  const pod: MpPod = { ...pending, mounter: children.add(startMounter(pending.commDir)) };
  h.mpPods.push(pod);
  await waitFor(
    "the mounter socket",
    () => Deno.stat(`${pod.commDir}/mount.sock`).then(() => true, () => false),
    { timeoutMs: 60_000 },
  );
}

/**
 * Wait until the child issuing the call holds a connection accepted on the plugin's socket (the
 * call is in): a server-side row of `ss -x` has the socket path as its local address and the
 * child's socket as its peer.
 */
async function waitCallIn(sock: string, child: Running): Promise<void> {
  await waitFor("the in-flight publish to reach the node plugin", async () => {
    const rows = (await runToEnd("ss", ["-xpH", "state", "established"])).stdout.split("\n")
      .map((l) => l.trim().split(/\s+/));
    // u_str recv send <local> <inode> <peer> <peer-inode> [users]
    const accepted = new Set(rows.filter((r) => r[3] === sock).map((r) => r[6]));
    return rows.some((r) => accepted.has(r[4]) && (r[7] ?? "").includes(`pid=${child.child.pid},`));
  }, { timeoutMs: 30_000, intervalMs: 100 });
  await new Promise((r) => setTimeout(r, 300));
}

/** SIGKILL the node plugin with no channel of ours open; returns how the in-flight call ended. */
async function killNode(h: Harness, inflight: Running): Promise<string> {
  h.csi.close();
  await h.node.stop("SIGKILL");
  const exit = await waitExit(inflight, 30_000);
  return inflight.stdout().trim() || exit.stderr;
}

faultTest(
  "node plugin SIGKILLed mid-publish (waiting for the pod, then for the mounter) and restarted: retries succeed, no duplicate or leaked mount, other mounts keep working",
  async (h, children) => {
    const sock = `${h.root}/csi.sock`;
    // A live volume of another pod, which must keep working across both kills.
    const mpA = await h.mountpointPod("mp-a");
    // Before the mount lists the bucket (rclone caches directory listings).
    await putObject(h.s3, h.bucket, "a-big.bin", 48 << 20);
    const ta = await publishVolume(h, mpA, "pv-a", "uid-a");
    const closedA = await writeClosedFiles(ta, { "a-1.txt": 1000, "a-9m.bin": 9 << 20 }, 5);
    const liveA = async (step: string) => {
      for (const [name, sum] of closedA) {
        assert.equal(await sha256(await Deno.readFile(`${ta}/${name}`)), sum, `${name} ${step}`);
      }
      const more = await writeClosedFiles(ta, { [`a-${step}.txt`]: 500 }, 6);
      for (const [k, v] of more) closedA.set(k, v);
    };

    // (i) Killed while the publish waits for the Mountpoint Pod to be Running.
    const mpB = await pendingMountpointPod(h, "mp-b");
    await h.assign("pv-b", "vol-pv-b", mpB.name, ["uid-b"]);
    const tb = h.target("uid-b", "pv-b");
    await kubeletMkdirParent(tb);
    // A reader of pod A's volume runs across both kills and restarts.
    const readerA = children.add(slowReader(`${ta}/a-big.bin`));
    await waitProgress(readerA, 2, "pod A's reader");
    let readerDone = false;
    readerA.child.status.then(() => (readerDone = true));
    const inflightB = children.add(publishInChild(sock, h.publishRequest("uid-b", "pv-b")));
    await waitCallIn(sock, inflightB);
    const endedB = await killNode(h, inflightB);
    assert.match(
      endedB,
      /^error: .*Connection dropped/,
      `the in-flight call fails (kubelet retries): ${endedB}`,
    );
    assert.deepEqual(
      (await h.ourMounts()).filter((m) => !m.includes("pv-a") && !m.endsWith("/mp-a")),
      [],
      "nothing mounted for the pod being published",
    );
    assert.equal(await exists(`${mpB.commDir}/${CREDENTIALS_DIR}`), false, "no credentials");
    await liveA("while-down-1");
    const restart1 = performance.now();
    await h.restartNode();
    const restart1Ms = Math.round(performance.now() - restart1);
    await liveA("after-restart-1");
    await startPodMounter(h, mpB, children);
    await setRunning(h, mpB.name);
    const retryB0 = performance.now();
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-b", "pv-b"));
    const retryBMs = Math.round(performance.now() - retryB0);
    const closedB = await writeClosedFiles(tb, { "b-1.txt": 2000 }, 7);

    // (ii) Killed while the publish waits for the mounter's socket: the FUSE source is mounted and
    // the credentials are written; the plugin's death closes the only /dev/fuse fd.
    const mpC = await pendingMountpointPod(h, "mp-c");
    await setRunning(h, mpC.name);
    await h.assign("pv-c", "vol-pv-c", mpC.name, ["uid-c"]);
    const tc = h.target("uid-c", "pv-c");
    await kubeletMkdirParent(tc);
    const sourceC = `${h.root}/plugins/s3.csi.scality.com/mnt/${mpC.name}`;
    h.csi.close();
    const inflightC = children.add(publishInChild(sock, h.publishRequest("uid-c", "pv-c")));
    await waitFor(
      "the source of mp-c to be mounted",
      async () => findMount(await readMountInfo(), sourceC),
      { timeoutMs: 30_000 },
    );
    const endedC = await killNode(h, inflightC);
    assert.equal(readerDone, false, "pod A's reader is still reading at the second kill");
    assert.match(
      endedC,
      /^error: .*Connection dropped/,
      `the in-flight call fails (kubelet retries): ${endedC}`,
    );
    await liveA("while-down-2");
    await h.restartNode();
    await liveA("after-restart-2");
    await startPodMounter(h, mpC, children);
    const retryC0 = performance.now();
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-c", "pv-c"));
    const retryCMs = Math.round(performance.now() - retryC0);
    const closedC = await writeClosedFiles(tc, { "c-1.txt": 3000 }, 8);

    // One source per Mountpoint Pod, one bind per target, every one alive.
    const mounts = (await readMountInfo()).filter((m) => m.mountPoint.startsWith(h.root));
    const byPoint = mounts.map((m) => m.mountPoint).sort();
    const src = (n: string) => `${h.root}/plugins/s3.csi.scality.com/mnt/${n}`;
    assert.deepEqual(byPoint, [src("mp-a"), src("mp-b"), src("mp-c"), ta, tb, tc].sort());
    assert.equal(new Set(mounts.map((m) => m.majorMinor)).size, 3, "three FUSE connections");
    for (const [pv, t] of [["pv-a", ta], ["pv-b", tb], ["pv-c", tc]]) {
      const stats = await h.csi.node.nodeGetVolumeStats({ volumeId: `vol-${pv}`, volumePath: t! });
      assert.equal(
        stats.volumeCondition?.abnormal,
        false,
        `${pv}: ${stats.volumeCondition?.message}`,
      );
    }
    const nodePids = await runToEnd("pgrep", ["-f", "--", `--kubelet-path=${h.root}`]);
    assert.equal(nodePids.stdout.trim().split("\n").length, 1, "one node plugin process");
    await assertInS3(h.s3, h.bucket, new Map([...closedA, ...closedB, ...closedC]));
    const readA = await waitExit(readerA, 60_000);
    assert.equal(readA.code, 0, `pod A's reader: ${readA.stderr}`);
    const bytesA = readerA.stdout().split("\n").filter(Boolean).reduce((a, n) => a + Number(n), 0);
    assert.equal(bytesA, 48 << 20, "pod A's reader read the whole object across both restarts");
    report(
      `node-kill-mid-publish: call waiting for the pod ended "${endedB}"; call waiting for the mounter ended "${endedC}"; node plugin restart ${restart1Ms} ms; retried publishes ${retryBMs} ms (pod wait) and ${retryCMs} ms (dead source remounted); pod A's mount served reads and writes throughout (a reader read 48 MiB across both kills)`,
    );
  },
);
