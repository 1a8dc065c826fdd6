/**
 * Upgrade and rollback with workloads running (issue 22): version A of the driver (this tree as
 * deployed, `deno.json`'s version) serves writers that write, close and read back without pause
 * (`writer.ts`); `deno task deploy` of version B (the same tree built with `S3CSI_VERSION`: the
 * binaries embed B, the images are tagged B) replaces the node plugin and the controller, then
 * version A is deployed again the same way:
 *
 * - running writers see no error (a failed write or read ends them: `FAILED`, pod Failed) and keep
 *   closing files through the upgrade, served by their Mountpoint Pod of the old version — a
 *   running pod's image cannot change in place, so there is no hand-over (README "Upgrades and
 *   version skew") — and the new controller makes no Mountpoint Pod for them;
 * - a new writer of the same volume gets a Mountpoint Pod of the new version (the sharing key holds
 *   the driver version), made by the new controller (label `mounted-by-csi-driver-version`, image)
 *   and mounted by the new node plugin (the engine's user agent names the node plugin's version);
 * - the old version's Mountpoint Pod goes when its last writer leaves; every file the writers
 *   closed is in S3.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PODS } from "../../src/kube/resources.ts";
import { CONTROLLER_DEPLOYMENT, NODE_DAEMONSET } from "../../src/deploy/names.ts";
import { CONTROLLER_CONTAINERS } from "../../src/deploy/render_controller.ts";
import { NODE_CONTAINERS } from "../../src/deploy/render_node.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import { LABEL_DRIVER_VERSION } from "../../src/mppod/labels.ts";
import { DRIVER_VERSION } from "../../src/util/version.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, type ScenarioCluster, unique } from "./cluster.ts";
import { checkWrites, lastClosed, writerScript } from "./writer.ts";

/** Version B of this tree: the next patch release, marked as a test build. */
export function upgradeVersion(a: string): string {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(a);
  if (!m) throw new Error(`not a version: ${a}`);
  return `${m[1]}.${m[2]}.${Number(m[3]) + 1}-upgrade-test`;
}

const tagOf = (image: string | undefined) => image?.slice(image.lastIndexOf(":") + 1);

/** The running, not deleting pods of the driver's `app` (node plugins, controller). */
async function driverPods(e: ScenarioCluster, app: string): Promise<Pod[]> {
  return (await e.client.list<Pod>(PODS, {
    namespace: defaultValues().namespace,
    labelSelector: `app=${app}`,
  })).items.filter((p) => !p.metadata.deletionTimestamp);
}

/**
 * Every node plugin and the controller run `version`'s image, and their binaries say so in their
 * first log line ("Starting node plugin <version>", "Starting controller <version>").
 */
async function driverRuns(e: ScenarioCluster, version: string): Promise<string> {
  const checks = [
    { app: NODE_DAEMONSET, container: NODE_CONTAINERS.plugin, count: e.nodeNames().length },
    { app: CONTROLLER_DEPLOYMENT, container: CONTROLLER_CONTAINERS.controller, count: 1 },
  ];
  const seen: string[] = [];
  for (const c of checks) {
    const pods = await waitFor(`${c.app} pods of ${version} running`, async () => {
      const ps = await driverPods(e, c.app);
      return ps.length === c.count &&
        ps.every((p) =>
          p.status?.phase === "Running" &&
          tagOf(p.spec.containers.find((x) => x.name === c.container)?.image) === version
        ) && ps;
    }, { timeoutMs: 120_000, intervalMs: 500 });
    for (const p of pods) {
      await waitFor(`${p.metadata.name} says it is ${version}`, async () => {
        const log = await e.log(p, c.container);
        return new RegExp(`Starting (node plugin|controller) ${version.replaceAll(".", "\\.")}\\b`)
          .test(log) || log.includes(`"version":"${version}"`);
      }, { timeoutMs: 60_000, intervalMs: 500 });
    }
    seen.push(`${pods.length} ${c.app}`);
  }
  return seen.join(", ");
}

/** A writer pod's state: running, no failed write or read, the files it closed so far. */
async function writerOk(e: ScenarioCluster, pod: Pod): Promise<number> {
  const p = await e.client.get<Pod>(PODS, pod.metadata.name, e.ns);
  const log = await e.log(pod);
  assert.ok(!/^FAILED/m.test(log), `${pod.metadata.name} failed: ${await e.diagnose(pod)}`);
  assert.equal(p?.status?.phase, "Running", `${pod.metadata.name}: ${await e.diagnose(pod)}`);
  return lastClosed(log) + 1;
}

/** Wait until a writer closed `more` files after `from`. */
async function progresses(e: ScenarioCluster, pod: Pod, from: number, more = 5): Promise<number> {
  return await waitFor(`${pod.metadata.name} closes ${more} more files`, async () => {
    const n = await writerOk(e, pod);
    return n >= from + more && n;
  }, { timeoutMs: 60_000, intervalMs: 250 });
}

/** The Mountpoint Pod of a workload, with its version label and image tag. */
async function mountpointOf(e: ScenarioCluster, pod: Pod) {
  const name = await waitFor(
    `the Mountpoint Pod of ${pod.metadata.name}`,
    () => e.mountpointPodOf(pod),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  const mp = (await e.mountpointPods()).find((p) => p.metadata.name === name);
  assert.ok(mp, `Mountpoint Pod ${name} exists`);
  return {
    name,
    uid: mp.metadata.uid,
    version: mp.metadata.labels?.[LABEL_DRIVER_VERSION],
    tag: tagOf(mp.spec.containers[0]?.image),
  };
}

/** The engine of a Mountpoint Pod was mounted by a node plugin of `version` (its user agent). */
async function mountedBy(e: ScenarioCluster, bucket: string, mp: { uid: string }, version: string) {
  const engines = (await e.engineProcesses([bucket])).filter((p) =>
    p.includes(`pod ${mp.uid}:`) && /mount-s3/.test(p)
  );
  assert.ok(
    engines.some((p) => p.includes(`s3-csi-driver/${version} `)),
    `an engine of ${mp.uid} with the user agent of node plugin ${version}: ${engines.join("\n")}`,
  );
}

/** The scenario. */
export const UPGRADE: Scenario = {
  name:
    "upgrade A → B → A with writers running: no error, old Mountpoint Pods keep serving, new workloads get the new version's",
  nodes: 1,
  realNodeOnly: true,
  async run(e, step) {
    const a = DRIVER_VERSION;
    const b = upgradeVersion(a);
    const bucket = await e.bucket("upgrade");
    const vol = `upgrade-${unique()}`;
    const names = [1, 2, 3, 4].map((i) => `upgrade-w${i}-${unique()}`);
    const writer = async (name: string) => {
      const p = await e.pod({
        name,
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: writerScript(),
        env: { POD_NAME: name },
      });
      await e.waitLog(p, "CLOSED 3", 90_000);
      return p;
    };
    const counts = new Map<string, number>();
    const done = async (p: Pod) => {
      const closed = await writerOk(e, p);
      await e.deletePod(p.metadata.name);
      const inS3 = await checkWrites(e, bucket, p.metadata.name, closed);
      counts.set(p.metadata.name, inS3);
      return inS3;
    };
    const mpGone = (name: string) =>
      waitFor(
        `Mountpoint Pod ${name} deleted`,
        async () => !(await e.mountpointPods()).some((p) => p.metadata.name === name),
        {
          timeoutMs: 90_000,
          intervalMs: 250,
        },
      );
    try {
      await e.staticVolume(vol, { bucket });
      const [w1, w2, w3, w4] = names as [string, string, string, string];
      let old: Pod[] = [];
      let mpA: Awaited<ReturnType<typeof mountpointOf>> | undefined;
      await step(`version ${a} deployed; two writers share its Mountpoint Pod`, async () => {
        const summary = await e.deployVersion(a);
        const running = await driverRuns(e, a);
        old = [await writer(w1), await writer(w2)];
        mpA = await mountpointOf(e, old[0]!);
        assert.equal((await mountpointOf(e, old[1]!)).name, mpA.name, "one shared Mountpoint Pod");
        assert.equal(mpA.version, a, "labelled with A by the controller");
        assert.equal(mpA.tag, a, "the Mountpoint image of A");
        await mountedBy(e, bucket, mpA, a);
        return `${summary}; ${running}`;
      });

      let before: number[] = [];
      await step(`deno task deploy ${b} (same tree, S3CSI_VERSION=${b}): rolled out`, async () => {
        before = await Promise.all(old.map((p) => writerOk(e, p)));
        const summary = await e.deployVersion(b);
        return `${summary}; ${await driverRuns(e, b)}`;
      });

      let mpB: Awaited<ReturnType<typeof mountpointOf>> | undefined;
      await step(
        `the writers saw no error across the upgrade; ${a}'s Mountpoint Pod keeps serving them`,
        async () => {
          const after = await Promise.all(old.map((p, i) => progresses(e, p, before[i]!)));
          const now = await mountpointOf(e, old[0]!);
          assert.deepEqual([now.name, now.uid, now.version], [mpA!.name, mpA!.uid, a]);
          assert.deepEqual(
            (await e.mountpointPods()).map((p) => p.metadata.name),
            [mpA!.name],
            `the ${b} controller made no Mountpoint Pod for the running writers`,
          );
          return old.map((p, i) =>
            `${p.metadata.name}: ${before[i]} files closed before, ${after[i]} after, 0 errors`
          ).join("; ");
        },
      );

      let w3Pod: Pod | undefined;
      await step(`a new writer of the volume gets a Mountpoint Pod of ${b}`, async () => {
        w3Pod = await writer(w3);
        mpB = await mountpointOf(e, w3Pod);
        assert.notEqual(mpB.name, mpA!.name, "not the old version's pod");
        assert.equal(mpB.version, b, "labelled with B by the controller of B");
        assert.equal(mpB.tag, b, "the Mountpoint image of B");
        await mountedBy(e, bucket, mpB, b);
        await Promise.all(old.map((p) => writerOk(e, p)));
        return `${mpA!.name} (${a}) and ${mpB.name} (${b}) serve one volume`;
      });

      await step(`the ${a} writers leave: ${a}'s Mountpoint Pod goes, ${b}'s stays`, async () => {
        const n = [];
        for (const p of old) n.push(await done(p));
        await mpGone(mpA!.name);
        const left = (await e.mountpointPods()).map((p) => p.metadata.name);
        assert.deepEqual(left, [mpB!.name]);
        await progresses(e, w3Pod!, await writerOk(e, w3Pod!), 3);
        return `${n.join(" + ")} files in S3, every one complete`;
      });

      let mpA2: Awaited<ReturnType<typeof mountpointOf>> | undefined;
      let w4Pod: Pod | undefined;
      await step(`rollback: deno task deploy ${a}; the ${b} writer sees no error`, async () => {
        const from = await writerOk(e, w3Pod!);
        const summary = await e.deployVersion(a);
        const running = await driverRuns(e, a);
        const to = await progresses(e, w3Pod!, from);
        const now = await mountpointOf(e, w3Pod!);
        assert.deepEqual([now.name, now.uid, now.version], [mpB!.name, mpB!.uid, b]);
        assert.deepEqual(
          (await e.mountpointPods()).map((p) => p.metadata.name),
          [mpB!.name],
          `the ${a} controller made no Mountpoint Pod for the running writer`,
        );
        return `${summary}; ${running}; ${w3}: ${from} files before, ${to} after, 0 errors`;
      });

      await step(`after the rollback a new writer gets a Mountpoint Pod of ${a}`, async () => {
        w4Pod = await writer(w4);
        mpA2 = await mountpointOf(e, w4Pod);
        assert.notEqual(mpA2.name, mpB!.name);
        assert.equal(mpA2.version, a);
        assert.equal(mpA2.tag, a);
        await mountedBy(e, bucket, mpA2, a);
        return mpA2.name;
      });

      await step(
        `the ${b} writer leaves: ${b}'s Mountpoint Pod goes; then all released`,
        async () => {
          const n3 = await done(w3Pod!);
          await mpGone(mpB!.name);
          assert.deepEqual((await e.mountpointPods()).map((p) => p.metadata.name), [mpA2!.name]);
          const n4 = await done(w4Pod!);
          await e.waitReleased(90_000);
          assert.deepEqual(await e.fuseMounts(), [], "nothing mounted");
          return `${n3} + ${n4} files in S3; per writer: ${
            [...counts].map(([k, v]) => `${k.replace(/-[0-9a-f]{8}$/, "")} ${v}`).join(", ")
          }; 0 errors`;
        },
      );
    } finally {
      for (const n of names) await e.deletePod(n).catch(() => {});
      // Leave the cluster at the version it started with, whatever failed.
      await e.deployVersion(a).catch(() => {});
      await e.dropVolume(vol);
      await e.dropBucket(bucket);
    }
  },
};
