/**
 * Scenarios only a real node can show: who the Mountpoint container really runs as (read from
 * `/proc` on the host), and what crashes do — the node plugin container killed while a workload
 * uses its mount, the controller killed mid-reconcile, the kubelet and the node plugin killed
 * together while a workload is deleted.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { PODS } from "../../src/kube/resources.ts";
import { MOUNTPOINT_CONTAINER } from "../../src/mppod/pod_spec.ts";
import { ANNOTATION_VOLUME_NAME, DEFAULT_MOUNTPOINT_NAMESPACE } from "../../src/mppod/labels.ts";
import { sourceMountRoot } from "../../src/mppod/paths.ts";
import { isFuseDeviceFile } from "../../src/sys/fuse_device.ts";
import { CONTROLLER_CONTAINERS } from "../../src/deploy/render_controller.ts";
import { NODE_CONTAINERS } from "../../src/deploy/render_node.ts";
import { CONTROLLER_DEPLOYMENT } from "../../src/deploy/names.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import {
  containerIdOf,
  type ContainerStatusLike,
  type HostProcess,
  hostProcesses,
  killContainer,
  processTree,
  procStatus,
  taskPid,
} from "../testbed/services/real_node/host.ts";
import { killKubelet, restartKubelet } from "../testbed/services/real_node/real_node.ts";
import { waitFor } from "../_helpers.ts";
import { type Step, unique } from "../scenarios/cluster.ts";
import { DRIVER_NAMESPACE, type RealNodeCluster, report, type Tier } from "./_harness.ts";

const NO_CAPS = "0000000000000000";

function containerStatus(pod: Pod | undefined, name: string): ContainerStatusLike | undefined {
  return (pod?.status?.containerStatuses as ContainerStatusLike[] | undefined)?.find((c) =>
    c.name === name
  );
}

/**
 * The processes of a Mountpoint Pod's container, from `/proc` on the host (the mounter is the first
 * — once it has its mount, it is the supervisor it replaced itself with — and its engine,
 * `mount-s3` or `rclone`, below it), and the engine among them.
 */
export async function mountpointProcesses(
  e: RealNodeCluster,
  mp: Pod | undefined,
): Promise<{ tree: HostProcess[]; engine: HostProcess | undefined }> {
  const id = containerIdOf(containerStatus(mp, MOUNTPOINT_CONTAINER));
  assert.ok(id, `Mountpoint container of ${mp?.metadata.name} is running`);
  const tree = processTree(await hostProcesses(), await taskPid(e.node, id));
  const program = (p: HostProcess) => p.cmdline.split(" ")[0]!.replace(/^.*\//, "");
  return { tree, engine: tree.find((p) => /^(rclone|mount-s3)$/.test(program(p))) };
}

async function controllerPod(e: RealNodeCluster): Promise<Pod> {
  const pods = (await e.client.list<Pod>(PODS, {
    namespace: DRIVER_NAMESPACE,
    labelSelector: `app=${CONTROLLER_DEPLOYMENT}`,
  })).items.filter((p) => !p.metadata.deletionTimestamp);
  assert.equal(pods.length, 1, `one controller pod: ${pods.map((p) => p.metadata.name)}`);
  return pods[0]!;
}

/** Kill one container of a pod and wait until the kubelet restarted it and it is ready again. */
async function crashAndWaitRestart(
  e: RealNodeCluster,
  get: () => Promise<Pod | undefined>,
  container: string,
  timeoutMs = 120_000,
): Promise<{ before: number; after: number; downMs: number }> {
  const pod = await get();
  const status = containerStatus(pod, container);
  const id = containerIdOf(status);
  assert.ok(id && status?.ready, `${container} is running and ready before the kill`);
  const before = status!.restartCount ?? 0;
  const t0 = performance.now();
  await killContainer(e.node, id);
  let after = before;
  await waitFor(`${container} restarted by the kubelet and ready`, async () => {
    const s = containerStatus(await get(), container);
    after = s?.restartCount ?? 0;
    return after > before && s?.ready === true;
  }, { timeoutMs, intervalMs: 250 });
  return { before, after, downMs: performance.now() - t0 };
}

/** A busybox script: a loop that lists, writes, reads back and checksums, one line per round. */
function busyLoop(sum: string): string {
  return `mkdir -p /data/w; n=0; echo READY; while true; do
  s=$(md5sum < /data/seed.bin | cut -d' ' -f1)
  if [ "$s" = "${sum}" ] && ls /data > /dev/null && echo "$n" > /data/w/$n.txt && [ "$(cat /data/w/$n.txt)" = "$n" ]; then
    echo "OK $n"
  else
    echo "FAIL $n $s"
  fi
  n=$((n+1)); sleep 0.2
done`;
}

function okCount(log: string): number {
  return log.split("\n").filter((l) => l.startsWith("OK ")).length;
}

/** A seed object (256 KiB, deterministic) and its md5. */
function seed(): { body: Uint8Array; md5: string } {
  const body = new Uint8Array(256 * 1024);
  for (let i = 0; i < body.length; i++) body[i] = (i * 7 + (i >> 9)) & 0xff;
  return { body, md5: createHash("md5").update(body).digest("hex") };
}

/**
 * The Mountpoint container of a shared Mountpoint Pod runs, on the host, as uid/gid 1000 with
 * no capability in any set, no-new-privileges and seccomp filtering — the mounter and its engine,
 * which holds the `/dev/fuse` fd the node plugin opened and passed.
 */
export async function mountpointIdentity(tier: Tier, step: Step): Promise<void> {
  const e = tier.cluster;
  await step(
    "Mountpoint container processes: uid 1000, no capabilities (/proc on the host)",
    async () => {
      const bucket = await e.bucket("ident");
      const vol = `ident-${unique()}`;
      await e.staticVolume(vol, { bucket });
      const pod = await e.pod({
        name: `ident-${unique()}`,
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: "set -e; echo hi > /data/hi.txt; echo READY; exec sleep 300",
      });
      try {
        await e.waitLog(pod, "READY");
        const mpName = await e.mountpointPodOf(pod);
        assert.ok(mpName, "the workload has a Mountpoint Pod");
        const mp = await e.client.get<Pod>(PODS, mpName, DEFAULT_MOUNTPOINT_NAMESPACE);
        const { tree, engine } = await mountpointProcesses(e, mp);
        const mounter = tree.find((p) => /s3-csi-supervisor/.test(p.cmdline.split(" ")[0]!));
        assert.ok(
          mounter,
          `the mounter, become the supervisor, runs in the container: ${
            tree.map((p) => p.cmdline)
          }`,
        );
        assert.ok(engine, `the engine runs in the container: ${tree.map((p) => p.cmdline)}`);
        const seen: string[] = [];
        for (const p of tree) {
          const s = await procStatus(p.pid);
          const what = `${p.pid} ${p.cmdline.slice(0, 60)}`;
          assert.match(s.get("Uid") ?? "", /^1000\s+1000\s+1000\s+1000$/, `${what}: Uid`);
          assert.match(s.get("Gid") ?? "", /^1000\s+1000\s+1000\s+1000$/, `${what}: Gid`);
          for (const set of ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]) {
            assert.equal(s.get(set), NO_CAPS, `${what}: ${set}`);
          }
          assert.equal(s.get("NoNewPrivs"), "1", `${what}: NoNewPrivs`);
          assert.equal(s.get("Seccomp"), "2", `${what}: Seccomp (filter)`);
          seen.push(
            `${p.cmdline.split(" ")[0]} Uid ${s.get("Uid")!.split(/\s+/)[0]} CapEff ${
              s.get("CapEff")
            }`,
          );
        }
        // By what the fd is (FUSE char device 10:229): the path it shows depends on the reader's
        // root (<root>/dev/fuse when the node runs in a chroot).
        const fds = await Array.fromAsync(Deno.readDir(`/proc/${engine.pid}/fd`));
        const devices = await Promise.all(
          fds.map((f) => Deno.stat(`/proc/${engine.pid}/fd/${f.name}`).catch(() => undefined)),
        );
        assert.ok(
          devices.some((d) => d !== undefined && isFuseDeviceFile(d)),
          "the engine holds the passed /dev/fuse fd",
        );
        report(`Mountpoint container ${mpName}: ${seen.join("; ")}`);
      } finally {
        await e.deletePod(pod.metadata.name).catch(() => {});
        await e.waitReleased().catch(() => {});
        await e.dropVolume(vol);
        await e.dropBucket(bucket);
      }
    },
  );
}

/**
 * The node plugin container is killed (SIGKILL) while a workload lists, writes and reads its mount
 * in a loop: the DaemonSet's container is restarted by the kubelet, the workload never sees an
 * error (the FUSE connection belongs to the Mountpoint Pod, not to the node plugin), the restarted
 * plugin adopts the live mount (a second workload of the volume is published onto the same
 * Mountpoint Pod) and unmounts it when the workloads are gone — as documented in README "Known
 * limitations".
 */
export async function nodePluginCrash(tier: Tier, step: Step): Promise<void> {
  const e = tier.cluster;
  const { body, md5 } = seed();
  const bucket = await e.bucket("crash");
  const vol = `crash-${unique()}`;
  const names: string[] = [];
  try {
    await e.put(bucket, "seed.bin", body);
    await e.staticVolume(vol, { bucket });
    const reader = await e.pod({
      name: `crash-reader-${unique()}`,
      volumes: [{ claim: vol, mountPath: "/data" }],
      script: busyLoop(md5),
    });
    names.push(reader.metadata.name);
    await step("a workload lists, writes and reads the mount in a loop", async () => {
      await waitFor("5 good rounds", async () => okCount(await e.log(reader)) >= 5, {
        timeoutMs: 60_000,
        intervalMs: 200,
      }).catch(async (err) => {
        throw new Error(`${err}: ${await e.diagnose(reader)}`);
      });
    });
    const mp = await e.mountpointPodOf(reader);
    await step(
      "node plugin container killed; the kubelet restarts it; no round fails",
      async () => {
        const atKill = okCount(await e.log(reader));
        const r = await crashAndWaitRestart(e, () => e.nodePluginPod(), NODE_CONTAINERS.plugin);
        const atRestart = okCount(await e.log(reader));
        await waitFor(
          "10 more good rounds after the restart",
          async () => okCount(await e.log(reader)) >= atRestart + 10,
          { timeoutMs: 60_000, intervalMs: 200 },
        );
        const log = await e.log(reader);
        const failed = log.split("\n").filter((l) => l.startsWith("FAIL"));
        assert.deepEqual(
          failed,
          [],
          "no round failed while the node plugin was down or restarting",
        );
        report(
          `node plugin restart ${r.before}→${r.after} in ${(r.downMs / 1000).toFixed(1)} s; ` +
            `rounds: ${atKill} before the kill, ${atRestart - atKill} while down, ${
              okCount(log) - atRestart
            } after`,
        );
      },
    );
    await step("the restarted plugin adopts the mount: a second workload shares it", async () => {
      const second = await e.pod({
        name: `crash-second-${unique()}`,
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: "set -e; md5sum < /data/seed.bin; ls /data/w | wc -l; echo READY; exec sleep 300",
      });
      names.push(second.metadata.name);
      await e.waitLog(second, "READY");
      assert.match(await e.log(second), new RegExp(md5), "the second workload reads the seed");
      assert.equal(await e.mountpointPodOf(second), mp, "same Mountpoint Pod");
      const root = sourceMountRoot(e.kubeletRoot(e.nodeNames()[0]!));
      const fuse = await e.fuseMounts();
      assert.equal(fuse.filter((m) => m.mountPoint.startsWith(`${root}/`)).length, 1, "one source");
      assert.equal(new Set(fuse.map((m) => m.majorMinor)).size, 1, "one FUSE connection");
    });
    await step("workloads deleted: the restarted plugin unmounts everything", async () => {
      for (const n of names) await e.deletePod(n);
      await e.waitReleased();
      assert.deepEqual(await e.fuseMounts(), []);
      assert.ok((await e.keys(bucket, "w/")).length >= 15, "the rounds' writes are in S3");
    });
  } finally {
    for (const n of names) await e.deletePod(n).catch(() => {});
    await e.dropVolume(vol);
    await e.dropBucket(bucket);
  }
}

/**
 * The controller container is killed (SIGKILL) while four workloads of one volume are being
 * attached — once right after they are created, once right after the first S3PA appears. The
 * restarted controller (a new leader after the Lease expires) finishes the job with exactly one
 * Mountpoint Pod and one S3PA listing all four workloads (deterministic names, ADR 0004).
 */
export async function controllerCrash(tier: Tier, step: Step): Promise<void> {
  const e = tier.cluster;
  const bucket = await e.bucket("ctrl");
  const vols: string[] = [];
  const names: string[] = [];
  try {
    for (const when of ["right after the workloads are created", "when the first S3PA appears"]) {
      await step(`controller killed ${when}: no duplicate Mountpoint Pod or S3PA`, async () => {
        const vol = `ctrl-${unique()}`;
        vols.push(vol);
        await e.staticVolume(vol, { bucket });
        const pods = await Promise.all([0, 1, 2, 3].map(async (i) => {
          const p = await e.pod({
            name: `ctrl-${i}-${unique()}`,
            volumes: [{ claim: vol, mountPath: "/data" }],
            script: `set -e; echo ${i} > /data/$HOSTNAME.txt; echo READY; exec sleep 300`,
          });
          names.push(p.metadata.name);
          return p;
        }));
        const uids = new Set(pods.map((p) => p.metadata.uid));
        const mine = async () =>
          (await e.s3pas()).filter((s) =>
            Object.values(s.spec?.mountpointS3PodAttachments ?? {}).flat().some((w) =>
              uids.has(w.workloadPodUID)
            )
          );
        if (when.startsWith("when")) {
          await waitFor("the first S3PA", async () => (await mine()).length > 0, {
            timeoutMs: 30_000,
            intervalMs: 20,
          });
        }
        const attachedAtKill = (await mine()).flatMap((s) =>
          Object.values(s.spec?.mountpointS3PodAttachments ?? {}).flat()
        ).length;
        const r = await crashAndWaitRestart(
          e,
          () =>
            controllerPod(e),
          CONTROLLER_CONTAINERS.controller,
        );
        for (const p of pods) await e.waitLog(p, "READY", 120_000);
        const s3pas = await mine();
        assert.equal(s3pas.length, 1, `one S3PA: ${s3pas.map((s) => s.metadata?.name)}`);
        const attachments = s3pas[0]!.spec!.mountpointS3PodAttachments!;
        assert.equal(Object.keys(attachments).length, 1, "one Mountpoint Pod in the S3PA");
        const listed = Object.values(attachments).flat().map((w) => w.workloadPodUID).sort();
        assert.deepEqual(listed, [...uids].sort(), "every workload listed once");
        const mp = Object.keys(attachments)[0]!;
        const mps = (await e.mountpointPods()).filter((p) =>
          p.metadata.name === mp || p.metadata.annotations?.[ANNOTATION_VOLUME_NAME] === vol
        );
        assert.deepEqual(mps.map((p) => p.metadata.name), [mp], "one Mountpoint Pod");
        report(
          `controller killed ${when} (${attachedAtKill}/4 attached at the kill); restarted ` +
            `${r.before}→${r.after}, all 4 attached ${
              (r.downMs / 1000).toFixed(1)
            } s after the kill`,
        );
      });
    }
    await step("workloads deleted: released by the restarted controller", async () => {
      for (const n of names) await e.deletePod(n);
      // Within the event path's time, not the stale cleaner's (2 min + 2 min by default).
      await e.waitReleased().catch(async (err) => {
        const left = (await e.s3pas()).map((s) =>
          `${s.metadata?.name} still lists ${
            Object.values(s.spec?.mountpointS3PodAttachments ?? {}).flat().length
          } deleted workload(s)`
        );
        throw new Error(`${err}: ${left.join("; ")}`);
      });
      assert.deepEqual(await e.fuseMounts(), []);
    });
  } finally {
    for (const n of names) await e.deletePod(n).catch(() => {});
    for (const v of vols) await e.dropVolume(v);
    await e.dropBucket(bucket);
  }
}

/**
 * The kubelet and the node plugin die together (SIGKILL) while a workload uses a volume, and the
 * workload is force-deleted from the API meanwhile: its containers and mounts are stale. When the
 * kubelet comes back it kills the orphaned containers and unpublishes the orphaned volume from
 * what is on disk through the restarted node plugin, which also unmounts the released Mountpoint
 * Pod's source: no mount, pod dir, process, Mountpoint Pod or S3PA is left, and the volume mounts
 * again afterwards.
 */
export async function kubeletAndPluginCrash(tier: Tier, step: Step): Promise<void> {
  const e = tier.cluster;
  const bucket = await e.bucket("stale");
  const vol = `stale-${unique()}`;
  await e.staticVolume(vol, { bucket });
  let kubeletDown = false;
  try {
    const pod = await e.pod({
      name: `stale-${unique()}`,
      volumes: [{ claim: vol, mountPath: "/data" }],
      script: "set -e; echo before > /data/before.txt; echo READY; exec sleep 300",
    });
    await e.waitLog(pod, "READY");
    const uid = pod.metadata.uid;
    const targetOf = async () =>
      (await e.fuseMounts()).filter((m) => m.mountPoint.includes(`/pods/${uid}/`));
    assert.equal((await targetOf()).length, 1, "the workload's target is mounted");
    const pluginBefore = containerStatus(await e.nodePluginPod(), NODE_CONTAINERS.plugin);
    await step("kubelet and node plugin killed; the workload force-deleted meanwhile", async () => {
      await killKubelet();
      kubeletDown = true;
      await killContainer(e.node, containerIdOf(pluginBefore)!);
      await e.client.delete(PODS, pod.metadata.name, e.ns, { gracePeriodSeconds: 0 });
      await waitFor(
        "the workload gone from the API",
        async () => !(await e.client.get(PODS, pod.metadata.name, e.ns)),
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      // Nothing on the node noticed: the mounts and the workload's processes are stale now.
      assert.equal((await targetOf()).length, 1, "the stale target is still mounted");
      assert.ok(
        (await hostProcesses()).some((p) => p.podUid === uid),
        "the deleted workload's processes still run",
      );
    });
    await step("kubelet restarted: stale mounts, processes and pod dir cleaned up", async () => {
      const t0 = performance.now();
      await restartKubelet();
      kubeletDown = false;
      await waitFor("the node plugin restarted and ready", async () => {
        const s = containerStatus(await e.nodePluginPod(), NODE_CONTAINERS.plugin);
        return (s?.restartCount ?? 0) > (pluginBefore?.restartCount ?? 0) && s?.ready === true;
      }, { timeoutMs: 120_000, intervalMs: 250 });
      await waitFor(
        "no mount, process or pod dir of the deleted workload",
        async () =>
          (await targetOf()).length === 0 &&
          !(await hostProcesses()).some((p) => p.podUid === uid) &&
          !(await Deno.lstat(`${e.kubeletRoot("")}/pods/${uid}`).then(() => true, () => false)),
        {
          timeoutMs: 120_000,
          intervalMs: 500,
        },
      ).catch(async (err) => {
        throw new Error(`${err}: mounts ${(await targetOf()).map((m) => m.mountPoint)}`);
      });
      await e.waitReleased(90_000);
      assert.deepEqual(await e.fuseMounts(), [], "no FUSE mount left on the node");
      report(
        `kubelet + node plugin restart: clean ${
          ((performance.now() - t0) / 1000).toFixed(1)
        } s after the kubelet came back`,
      );
    });
    await step("the volume mounts again afterwards", async () => {
      const out = await e.run({
        name: `stale-after-${unique()}`,
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: "set -e; cat /data/before.txt; echo after > /data/after.txt",
      });
      assert.match(out, /before/);
      assert.equal(await e.get(bucket, "after.txt"), "after\n");
      await e.waitReleased();
    });
  } finally {
    if (kubeletDown) await restartKubelet().catch(() => {});
    await e.dropVolume(vol);
    await e.dropBucket(bucket);
  }
}
