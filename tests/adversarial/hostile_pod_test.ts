/**
 * The adversarial tier: a real uid-1000 process in the Mountpoint Pod's role attacks the root node
 * plugin through the comm dir they share (run as root, with FUSE and RGW). It plants symbolic
 * links (to a root-only host file, to `/dev/zero`, to another pod's comm dir), FIFOs, huge files
 * and directories, and swaps them in a race, during publish, volume stats and the clean-up of a
 * Mountpoint Pod. The node plugin must never read or write outside the comm dir, never block past
 * the call's deadline, and answer with a clear error. Also here: the publish/unpublish race, the
 * mounter's restart as PID 1, checks of a hung FUSE mount, and who can reach bucket data.
 */
import assert from "node:assert/strict";
import { connectCsi } from "../../src/csi/client.ts";
import { Code } from "../../src/csi/errors.ts";
import { PODS } from "../../src/kube/resources.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import { sourceMountDir } from "../../src/mppod/paths.ts";
import { exists, runToEnd, waitFor } from "../_helpers.ts";
import { startNsMounter } from "../testbed/harness/node_faults.ts";
import {
  type Harness,
  kubeletMkdirParent,
  nodeTest,
  startHarness,
  startMounter,
  workDirOf,
} from "../testbed/harness/node_harness.ts";
import {
  asPodUser,
  canary,
  CRASH_SIGNS,
  exited,
  hostileMounter,
  rssMiB,
  rssPeak,
  snapshotDir,
  threadsOf,
  timed,
} from "./_adversarial.ts";

/** The per-call deadline the tests give the node plugin (the kubelet gives about 2 minutes). */
const CALL_MS = 20_000;

/** A test with its own harness; afterwards the node plugin must not have crashed or leaked. */
function adversarialTest(name: string, fn: (h: Harness) => Promise<void>): void {
  nodeTest(`adversarial: ${name}`, async () => {
    await using h = await startHarness({
      nodeArgs: ["--mount-timeout=10s", "--attachment-timeout=10s"],
    });
    const node = h.node;
    await fn(h);
    assert.equal(await exited(node), false, "the node plugin is still running");
    assert.doesNotMatch(node.stderr(), CRASH_SIGNS);
  });
}

const BOUND_SOCKET = new URL("./_bound_socket.ts", import.meta.url).pathname;

/** A mounter that bound its socket but does not listen yet: connections are refused. */
function notListening(comm: string) {
  return asPodUser(comm, `exec "${Deno.execPath()}" run -A --quiet "${BOUND_SOCKET}" mount.sock`);
}

function client(h: Harness) {
  return connectCsi(`${h.root}/csi.sock`, { timeoutMs: CALL_MS });
}

async function publishTarget(h: Harness, pod: string, pv: string, workload: string) {
  await h.assign(pv, `vol-${pv}`, pod, [workload]);
  const t = h.target(workload, pv);
  await kubeletMkdirParent(t);
  return t;
}

adversarialTest(
  "a credentials link to another pod's comm dir or to a host dir is refused; nothing is written or chowned there",
  async (h) => {
    await using secret = await canary();
    const victim = await h.mountpointPod("mp-victim");
    const hostDir = await Deno.makeTempDir({ prefix: "s3csi-hostdir-" });
    try {
      const before = {
        victim: await snapshotDir(victim.commDir),
        host: await snapshotDir(hostDir),
      };
      for (const [i, target] of [victim.commDir, hostDir, secret.path].entries()) {
        const mp = await h.mountpointPod(`mp-evil-${i}`);
        const plant = asPodUser(mp.commDir, `ln -sfn "${target}" credentials`);
        await plant.child.status;
        const t = await publishTarget(h, mp.name, `pv-c${i}`, `uid-c${i}`);
        const csi = client(h);
        const r = await timed(
          csi.node.nodePublishVolume(h.publishRequest(`uid-c${i}`, `pv-c${i}`)),
        );
        csi.close();
        assert.equal(r.error?.code, Code.FAILED_PRECONDITION, r.error?.details ?? "");
        assert.match(r.error!.details!, /tampered with its comm dir: "credentials" .* symlink/);
        assert.ok(!(await h.ourMounts()).includes(t), "nothing mounted");
      }
      assert.equal(
        await snapshotDir(victim.commDir),
        before.victim,
        "the other pod's dir is untouched",
      );
      assert.equal(await snapshotDir(hostDir), before.host, "the host dir is untouched");
      await secret.check();
    } finally {
      await Deno.remove(hostDir, { recursive: true });
    }
  },
);

adversarialTest(
  "publish: mount.error as a link to a host secret or /dev/zero, a FIFO, a huge file or a directory: a clear error in time, never the secret",
  async (h) => {
    await using secret = await canary();
    const plants = [`link:${secret.path}`, "link:/dev/zero", "fifo", "huge:64", "dir", "swap"];
    for (const [i, how] of plants.entries()) {
      const mp = await h.mountpointPod(`mp-err-${i}`, { mounter: hostileMounter(how) });
      const t = await publishTarget(h, mp.name, `pv-e${i}`, `uid-e${i}`);
      const csi = client(h);
      const r = await timed(csi.node.nodePublishVolume(h.publishRequest(`uid-e${i}`, `pv-e${i}`)));
      csi.close();
      assert.ok(r.error, `${how}: the publish failed`);
      assert.ok(r.ms < CALL_MS, `${how}: answered within the deadline (${Math.round(r.ms)} ms)`);
      assert.notEqual(r.error.code, Code.DEADLINE_EXCEEDED, `${how}: a clear error, not a timeout`);
      assert.doesNotMatch(r.error.details ?? "", new RegExp(secret.secret), how);
      assert.ok((r.error.details ?? "").length < 600, `${how}: a short message`);
      if (how.startsWith("link:") || how === "fifo" || how === "dir") {
        assert.match(r.error.details ?? "", /mount\.error.* refused/, how);
      }
      if (how.startsWith("huge")) assert.match(r.error.details ?? "", /HOSTILE-TAIL/, how);
      assert.deepEqual(
        (await h.ourMounts()).filter((m) => m === t || m === sourceMountDir(h.root, mp.name)),
        [],
        `${how}: nothing left mounted`,
      );
      await mp.mounter.stop("SIGKILL").catch(() => {});
    }
    await secret.check();
  },
);

adversarialTest(
  "stats: mount.error planted and swapped in a race: every answer in time, abnormal with a clear reason, never the secret",
  async (h) => {
    await using secret = await canary();
    const mp = await h.mountpointPod("mp-stats");
    const t = await publishTarget(h, mp.name, "pv-s", "uid-s");
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-s", "pv-s"));
    const swapper = asPodUser(
      mp.commDir,
      `i=0; while :; do i=$((i+1)); rm -rf .x; case $((i % 5)) in
       0) ln -s "${secret.path}" .x ;; 1) mkfifo .x ;; 2) ln -s /dev/zero .x ;;
       3) head -c 5000000 /dev/zero > .x ;; 4) mkdir .x ;; esac
       rm -rf mount.error; mv -T .x mount.error 2>/dev/null; done`,
    );
    try {
      const csi = client(h);
      let abnormal = 0;
      for (let i = 0; i < 40; i++) {
        const r = await timed(csi.node.nodeGetVolumeStats({ volumeId: "vol-pv-s", volumePath: t }));
        assert.ok(r.value, `stats answered: ${r.error?.details}`);
        assert.ok(r.ms < CALL_MS);
        const message = r.value.volumeCondition?.message ?? "";
        assert.doesNotMatch(message, new RegExp(secret.secret));
        if (r.value.volumeCondition?.abnormal) {
          abnormal++;
          assert.match(message, /reported:/);
        }
      }
      csi.close();
      assert.ok(abnormal > 0, "the planted reports were seen (as refusals or as the pod's text)");
    } finally {
      await swapper.stop("SIGKILL").catch(() => {});
    }
    await secret.check();
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-s", targetPath: t });
  },
);

adversarialTest(
  "clean-up of a Mountpoint Pod with credentials and mount.exit swapped for links: only the links go, nothing outside is written",
  async (h) => {
    await using secret = await canary();
    const victim = await h.mountpointPod("mp-victim2");
    const mp = await h.mountpointPod("mp-clean");
    const t = await publishTarget(h, mp.name, "pv-u", "uid-u");
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-u", "pv-u"));
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-u", targetPath: t });
    const before = await snapshotDir(victim.commDir);
    const swapper = asPodUser(
      mp.commDir,
      `while :; do rm -rf credentials; ln -sfn "${victim.commDir}" credentials;
       ln -sfn "${secret.path}" mount.exit; sleep 0.001; done`,
    );
    try {
      await h.kube.patch(PODS, mp.name, "mount-s3", {
        metadata: { annotations: { [ANNOTATION_NEEDS_UNMOUNT]: "true" } },
      });
      await waitFor(
        "the source to be unmounted",
        async () => !(await h.ourMounts()).includes(sourceMountDir(h.root, mp.name)),
        { timeoutMs: 30_000 },
      );
    } finally {
      await swapper.stop("SIGKILL").catch(() => {});
    }
    assert.equal(await snapshotDir(victim.commDir), before, "the other pod's dir is untouched");
    await secret.check();
  },
);

/** Empty files the adversary plants in `credentials/` (free of tmpfs pages: names only). */
const PLANTED_FILES = 300_000;
/** Peak memory growth of the node plugin the clean-up may cause (listing them took ~100 MiB). */
const CLEANUP_GROWTH_MIB = 24;

adversarialTest(
  `clean-up after a failed publish with ${PLANTED_FILES} long names planted in credentials/: the node plugin never lists them, its memory stays bounded`,
  async (h) => {
    const csi = client(h);
    const failedPublish = async (mp: { name: string }, n: string) => {
      await publishTarget(h, mp.name, `pv-${n}`, `uid-${n}`);
      const r = await timed(csi.node.nodePublishVolume(h.publishRequest(`uid-${n}`, `pv-${n}`)));
      assert.equal(
        r.error?.code,
        Code.FAILED_PRECONDITION,
        r.error?.details ?? "the publish failed",
      );
      assert.match(r.error!.details!, /mount\.error.* refused/);
      return r.ms;
    };
    // Warm up the same path (a failed publish and its clean-up) on a pod that plants nothing.
    await failedPublish(await h.mountpointPod("mp-warm", { mounter: hostileMounter("fifo") }), "w");
    const mp = await h.mountpointPod("mp-names", { mounter: hostileMounter("fifo") });
    const name = "n".repeat(200);
    const plant = asPodUser(
      mp.commDir,
      `mkdir -m 700 credentials && cd credentials && seq -f "${name}%.0f" 1 ${PLANTED_FILES} | xargs touch`,
    );
    assert.equal((await plant.child.status).code, 0, plant.stderr());
    let planted = 0;
    for await (const _ of Deno.readDir(`${mp.commDir}/credentials`)) planted++;
    assert.equal(planted, PLANTED_FILES, "the names are planted");
    const pid = h.node.child.pid;
    const before = await rssMiB(pid);
    let ms: number;
    let peak: number;
    {
      await using sampler = rssPeak(pid);
      ms = await failedPublish(mp, "n");
      peak = await sampler.peak();
    }
    const after = await rssMiB(pid);
    csi.close();
    const growth = peak - before;
    // deno-lint-ignore no-console
    console.log(
      `node plugin memory with ${PLANTED_FILES} planted names: RSS ${before} → peak ${peak} → ${after} MiB (growth ${
        Math.max(0, growth).toFixed(1)
      } MiB, bound ${CLEANUP_GROWTH_MIB} MiB); failed publish answered in ${Math.round(ms)} ms`,
    );
    assert.ok(growth < CLEANUP_GROWTH_MIB, `peak memory grew by ${growth.toFixed(1)} MiB`);
    const creds = `${mp.commDir}/credentials`;
    assert.equal(await exists(`${creds}/s3-csi-credentials`), false, "the credentials are gone");
    assert.equal(await exists(`${creds}/s3-csi-config`), false, "the config is gone");
  },
);

adversarialTest(
  "adoption by name: a pod under the Mountpoint Pod's name with another image gets no credentials and no FUSE connection",
  async (h) => {
    // Someone who can create pods in the namespace made the pod (the admission policy refuses
    // that in a cluster): its image is not the one the node plugin was given.
    const mp = await h.mountpointPod("mp-adopted", {
      mounter: hostileMounter("fifo"),
      edit: (pod) => (pod.spec.containers[0]!.image = "attacker.example/keys:latest"),
    });
    const t = await publishTarget(h, mp.name, "pv-a", "uid-a");
    const csi = client(h);
    const r = await timed(csi.node.nodePublishVolume(h.publishRequest("uid-a", "pv-a")));
    csi.close();
    assert.equal(r.error?.code, Code.FAILED_PRECONDITION);
    assert.match(
      r.error!.details!,
      /Mountpoint Pod mount-s3\/mp-adopted is not the pod the controller renders \(image is "attacker\.example\/keys:latest", not "[^"]+"\): it gets no credentials and no FUSE connection/,
    );
    assert.equal(await exists(`${mp.commDir}/credentials/s3-csi-credentials`), false, "no keys");
    assert.doesNotMatch(mp.mounter.stdout(), /received/, "no FUSE fd was sent");
    assert.deepEqual(await h.ourMounts(), [], `nothing mounted (${t} neither)`);
  },
);

adversarialTest(
  "publish/unpublish race: an unpublish during a publish waiting for its mounter cancels it; nothing stays mounted, even after the mounter starts",
  async (h) => {
    // The Mountpoint Pod runs, but its mounter does not listen yet (a socket that refuses).
    const mp = await h.mountpointPod("mp-race", { mounter: notListening });
    const t = await publishTarget(h, mp.name, "pv-r", "uid-r");
    const csi = client(h);
    const publishing = timed(csi.node.nodePublishVolume(h.publishRequest("uid-r", "pv-r")));
    await waitFor(
      "the source to be mounted",
      async () => (await h.ourMounts()).includes(sourceMountDir(h.root, mp.name)),
      { timeoutMs: 15_000 },
    );
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-r", targetPath: t });
    const p = await publishing;
    csi.close();
    assert.equal(p.error?.code, Code.ABORTED, p.error?.details ?? "");
    assert.match(p.error!.details!, /NodeUnpublishVolume .* arrived/);
    // The real mounter starts late and waits for a message that never comes: no mount appears.
    await mp.mounter.stop("SIGKILL").catch(() => {});
    mp.mounter = startMounter(mp.commDir);
    await waitFor(
      "the late mounter's socket",
      () => Deno.stat(`${mp.commDir}/mount.sock`).then(() => true, () => false),
      { timeoutMs: 60_000 },
    );
    assert.deepEqual(await h.ourMounts(), [], "no bind mount and no source mount leaked");
  },
);

adversarialTest(
  "mounter restart: killed 3 times as PID 1, the mounter starts clean each time (earlier run dirs removed, nothing else) and then serves a publish",
  async (h) => {
    const mp = await h.mountpointPod("mp-restart", { mounter: notListening });
    await mp.mounter.stop("SIGKILL").catch(() => {});
    const work = workDirOf(mp.commDir);
    await Deno.writeTextFile(`${work}/keep-me`, "not the mounter's"); // never removed
    for (let i = 0; i < 3; i++) {
      await Deno.remove(`${mp.commDir}/mount.sock`).catch(() => {});
      // As in the container: a read-only root filesystem, so no temp dir outside the volumes.
      const { running, innerPid } = await startNsMounter(mp.commDir, { env: { TMPDIR: "/proc" } });
      assert.equal(await exited(running), false, `start ${i}: the mounter runs`);
      await waitFor(
        `start ${i}: one run dir (the earlier ones removed), keep-me kept`,
        async () => {
          const names: string[] = [];
          for await (const e of Deno.readDir(work)) names.push(e.name);
          return names.filter((n) => n.startsWith("run-")).length === 1 &&
            names.includes("keep-me");
        },
      );
      assert.doesNotMatch(running.stderr(), /AlreadyExists|error:/);
      const inComm: string[] = [];
      for await (const e of Deno.readDir(mp.commDir)) inComm.push(e.name);
      assert.deepEqual(
        inComm.filter((n) => n.startsWith(".work")),
        [],
        "nothing of the mounter's own in the comm dir",
      );
      if (i < 2) {
        Deno.kill(innerPid, "SIGKILL"); // the container dies; kubelet restarts it
        await running.child.status;
      } else {
        mp.mounter = running;
      }
    }
    const t = await publishTarget(h, mp.name, "pv-m", "uid-m");
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-m", "pv-m"));
    await Deno.writeTextFile(`${t}/after-restarts.txt`, "ok\n");
    assert.equal(await Deno.readTextFile(`${t}/after-restarts.txt`), "ok\n");
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-m", targetPath: t });
  },
);

adversarialTest(
  "a hung FUSE mount: 30 volume stats leave at most one blocked probe thread, each answered in time",
  async (h) => {
    const mp = await h.mountpointPod("mp-hung");
    const t = await publishTarget(h, mp.name, "pv-h", "uid-h");
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-h", "pv-h"));
    // rclone itself, not the supervisor whose command line names it after "--".
    const engines = (await runToEnd("pgrep", ["-f", `^\\S*rclone mount2 s3:${h.bucket}`])).stdout
      .split("\n").filter(
        Boolean,
      ).map(Number);
    assert.equal(engines.length, 1, "one engine serves the volume");
    const pid = h.node.child.pid;
    const csi = client(h);
    // Warm up: the first calls start the runtime's worker threads.
    await csi.node.nodeGetVolumeStats({ volumeId: "vol-pv-h", volumePath: t });
    const before = await threadsOf(pid);
    Deno.kill(engines[0]!, "SIGSTOP"); // the engine stops answering: the FUSE mount hangs
    try {
      for (let i = 0; i < 30; i++) {
        const r = await timed(csi.node.nodeGetVolumeStats({ volumeId: "vol-pv-h", volumePath: t }));
        assert.ok(r.value, r.error?.details ?? "");
        assert.ok(r.ms < CALL_MS);
        assert.equal(r.value.volumeCondition?.abnormal, true);
        assert.match(r.value.volumeCondition?.message ?? "", /hung/);
      }
      const after = await threadsOf(pid);
      assert.ok(after - before <= 2, `threads ${before} → ${after}: bounded, not one per check`);
    } finally {
      Deno.kill(engines[0]!, "SIGCONT");
      csi.close();
    }
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-h", targetPath: t });
  },
);

adversarialTest(
  "bucket data: a host user cannot browse the source mount; the workload (uid 1000) reads and writes through its target",
  async (h) => {
    const mp = await h.mountpointPod("mp-modes");
    const t = await publishTarget(h, mp.name, "pv-p", "uid-p");
    await h.csi.node.nodePublishVolume(h.publishRequest("uid-p", "pv-p", {
      volumeCapability: {
        mount: { mountFlags: ["allow-delete", "allow-overwrite", "uid=1000", "gid=1000"] },
        accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
      },
    }));
    const source = sourceMountDir(h.root, mp.name);
    assert.equal(
      (await Deno.stat(`${h.root}/plugins/s3.csi.scality.com/mnt`)).mode! & 0o777,
      0o700,
    );
    const host = await runToEnd("setpriv", [
      "--reuid=1001",
      "--regid=1001",
      "--clear-groups",
      "ls",
      source,
    ]);
    assert.notEqual(host.code, 0, "a host user cannot list the source");
    assert.match(host.stderr, /Permission denied/);
    // The workload's view: its volume dir (the container sees only the bind mount).
    for (let d = t.replace(/\/mount$/, ""); d !== h.root; d = d.replace(/\/[^/]+$/, "")) {
      await Deno.chmod(d, 0o755);
    }
    const workload = await runToEnd("setpriv", [
      "--reuid=1000",
      "--regid=1000",
      "--clear-groups",
      "sh",
      "-c",
      `echo data > "${t}/w.txt" && cat "${t}/w.txt" && ls "${t}"`,
    ]);
    assert.equal(workload.code, 0, workload.stderr);
    assert.match(workload.stdout, /data\n[\s\S]*w\.txt/);
    await h.csi.node.nodeUnpublishVolume({ volumeId: "vol-pv-p", targetPath: t });
  },
);
