/**
 * Node drain with somewhere to go: writers of one volume (`tests/scenarios/writer.ts`, a
 * Deployment: `kubectl drain` evicts only managed pods) run on the first node, then
 * `kubectl drain --ignore-daemonsets --delete-emptydir-data` (no `--force`) empties it:
 *
 * - the writers are evicted first and start again on the other node, with a Mountpoint Pod there;
 *   every write they closed before is in S3;
 * - the Mountpoint Pod is not evicted while a writer uses it — its PodDisruptionBudget refuses
 *   (`render_cluster.ts`), kubectl drain retries — and leaves after them, released by the
 *   controller (which itself is evicted with the drain and comes back on the other node);
 * - nothing is left mounted on the drained node, and the cordoned node gets no new Mountpoint Pod:
 *   new writers go to the other node, one pinned to the cordoned node stays Pending and gets none.
 *
 * `--delete-emptydir-data`: kubectl drain refuses every pod with an emptyDir without it, and the
 * Mountpoint Pods' comm and work dirs are emptyDirs (so is the controller's /tmp); nothing in them
 * outlives the pod by design.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PODS } from "../../src/kube/resources.ts";
import { CONTROLLER_DEPLOYMENT } from "../../src/deploy/names.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../../src/mppod/labels.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, type ScenarioCluster, unique } from "./cluster.ts";
import { checkWrites, writerScript } from "./writer.ts";

const isMountpointPod = (p: Pod) =>
  p.metadata.labels?.[LABEL_COMPONENT] === COMPONENT_MOUNTPOINT_POD;
const isDaemonSetPod = (p: Pod) =>
  (p.metadata.ownerReferences as { kind?: string }[] | undefined)?.some((o) =>
    o.kind === "DaemonSet"
  ) ?? false;

/**
 * What each pod of a node was first seen doing: `leaving` (deletion started, or gone) and `done`
 * (its containers ended — a terminal phase — or gone: it no longer uses its volumes).
 */
class Departures {
  readonly leaving = new Map<string, number>();
  readonly done = new Map<string, number>();
  readonly #known = new Map<string, Pod>();

  /** Look once at the node's pods. */
  async observe(e: ScenarioCluster, node: string): Promise<void> {
    const now = performance.now();
    const pods = await e.podsOn(node);
    const present = new Set(pods.map((p) => p.metadata.uid));
    const first = (m: Map<string, number>, uid: string) => {
      if (!m.has(uid)) m.set(uid, now);
    };
    for (const p of pods) {
      this.#known.set(p.metadata.uid, p);
      if (p.metadata.deletionTimestamp) first(this.leaving, p.metadata.uid);
      const phase = p.status?.phase;
      if (phase === "Succeeded" || phase === "Failed") first(this.done, p.metadata.uid);
    }
    for (const uid of this.#known.keys()) {
      if (present.has(uid)) continue;
      first(this.leaving, uid);
      first(this.done, uid);
    }
  }

  /** The pods seen, by kind. */
  pods(filter: (p: Pod) => boolean): Pod[] {
    return [...this.#known.values()].filter(filter);
  }
}

/** The scenario. */
export const DRAIN: Scenario = {
  name:
    "kubectl drain: workloads evicted first, their writes in S3, Mountpoint Pods after them, nothing left",
  nodes: 2,
  realNodeOnly: true,
  async run(e, step) {
    const [drained, other] = e.nodeNames() as [string, string];
    const bucket = await e.bucket("drain");
    const vol = `drain-${unique()}`;
    const app = `drain-writer-${unique()}`;
    const pinned = `drain-pinned-${unique()}`;
    let cordoned: string[] = [];
    const cordon = async (node: string, on: boolean) => {
      await e.cordon(node, on);
      cordoned = on ? [...cordoned, node] : cordoned.filter((n) => n !== node);
    };
    const writers = () => e.podsWith(`app=${app}`);
    try {
      await e.staticVolume(vol, { bucket });
      const first: Pod[] = [];
      await step(`two writers of one volume and their Mountpoint Pod on ${drained}`, async () => {
        // The other node is cordoned while they start, so that they land on the drained one.
        await cordon(other, true);
        await e.deployment({
          name: app,
          replicas: 2,
          volumes: [{ claim: vol, mountPath: "/data" }],
          script: writerScript(),
        });
        const pods = await waitFor("two writers running", async () => {
          const ps = await writers();
          return ps.length === 2 && ps.every((p) => p.status?.phase === "Running") && ps;
        }, { timeoutMs: 90_000, intervalMs: 250 });
        for (const p of pods) await e.waitLog(p, "CLOSED 5");
        first.push(...pods);
        assert.deepEqual(pods.map((p) => p.spec.nodeName), [drained, drained]);
        const mps = (await e.podsOn(drained)).filter(isMountpointPod);
        assert.equal(mps.length, 1, "one shared Mountpoint Pod");
        await cordon(other, false);
      });

      let output = "";
      const seen = new Departures();
      await step(
        `kubectl drain ${drained} --ignore-daemonsets --delete-emptydir-data: exit 0`,
        async () => {
          const drain = e.kubectl([
            "drain",
            drained,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=240s",
          ], 300_000);
          let done = false;
          drain.finally(() => done = true);
          while (!done) {
            await seen.observe(e, drained);
            await new Promise((r) => setTimeout(r, 100));
          }
          await seen.observe(e, drained);
          const r = await drain;
          output = `${r.stdout}${r.stderr}`;
          cordoned.push(drained);
          assert.equal(r.code, 0, `kubectl drain failed:\n${output}`);
          const evicted = (output.match(/^pod\/\S+ evicted$/gm) ?? []).length;
          return `${evicted} pod(s) evicted`;
        },
      );
      await step(
        "the Mountpoint Pod was refused eviction while in use and left only after the writers",
        () => {
          const mps = seen.pods(isMountpointPod);
          assert.ok(mps.length >= 1, "the Mountpoint Pod was seen");
          assert.match(
            output,
            /Cannot evict pod as it would violate the pod's disruption budget/,
            `kubectl drain output:\n${output}`,
          );
          const writersDone = Math.max(...first.map((p) => seen.done.get(p.metadata.uid) ?? NaN));
          assert.ok(Number.isFinite(writersDone), "both writers ended on the node");
          const lags: string[] = [];
          for (const mp of mps) {
            const left = seen.leaving.get(mp.metadata.uid);
            assert.ok(left !== undefined, `${mp.metadata.name} left the node`);
            assert.ok(
              left >= writersDone,
              `${mp.metadata.name} was deleted ${
                ((writersDone - left) / 1000).toFixed(1)
              } s before the last writer ended`,
            );
            lags.push(((left - writersDone) / 1000).toFixed(1));
          }
          const refused = (output.match(/would violate the pod's disruption budget/g) ?? []).length;
          return `eviction refused ${refused}×; Mountpoint Pod deleted ${
            lags.join(", ")
          } s after the last writer ended`;
        },
      );
      await step(
        `nothing of the workloads is left on ${drained}; the writers run on ${other}`,
        async () => {
          const left = (await e.podsOn(drained)).filter((p) => !isDaemonSetPod(p));
          assert.deepEqual(left.map((p) => `${p.metadata.namespace}/${p.metadata.name}`), []);
          assert.deepEqual(await e.fuseMountsOn(drained), [], "no FUSE mount");
          const now = await waitFor("two writers running again", async () => {
            const ps = await writers();
            return ps.length === 2 && ps.every((p) => p.status?.phase === "Running") && ps;
          }, { timeoutMs: 120_000, intervalMs: 250 });
          for (const p of now) {
            assert.equal(p.spec.nodeName, other);
            await e.waitLog(p, "CLOSED 3", 90_000);
          }
          const mps = (await e.mountpointPods()).map((p) => p.spec.nodeName);
          assert.deepEqual(mps, [other], "one Mountpoint Pod, on the other node");
          const controller = (await e.client.list<Pod>(PODS, {
            namespace: defaultValues().namespace,
            labelSelector: `app=${CONTROLLER_DEPLOYMENT}`,
          })).items.map((p) => p.spec.nodeName);
          return `controller now on ${controller.join(", ")}`;
        },
      );
      await step("every write the evicted writers closed is in S3", async () => {
        const counts: number[] = [];
        for (const p of first) counts.push(await checkWrites(e, bucket, p.metadata.name, 6));
        return `${counts.join(" + ")} files`;
      });
      await step(
        `the cordoned ${drained} gets no new Mountpoint Pod: new writers go to ${other}, one pinned to ${drained} stays Pending`,
        async () => {
          await e.scale(app, 4);
          await waitFor("four writers running", async () => {
            const ps = await writers();
            return ps.length === 4 && ps.every((p) => p.status?.phase === "Running");
          }, { timeoutMs: 120_000, intervalMs: 250 });
          assert.deepEqual([...new Set((await writers()).map((p) => p.spec.nodeName))], [other]);
          const p = await e.pod({
            name: pinned,
            node: drained,
            volumes: [{ claim: vol, mountPath: "/data" }],
            script: writerScript(),
            env: { POD_NAME: pinned },
          });
          await waitFor("the pinned pod reported unschedulable", async () => {
            const got = await e.client.get<Pod>(PODS, pinned, e.ns);
            return got?.status?.conditions?.some((c) =>
              c.type === "PodScheduled" && c.status === "False"
            );
          }, { timeoutMs: 30_000, intervalMs: 250 });
          assert.equal(await e.mountpointPodOf(p), undefined, "no attachment for it");
          assert.deepEqual(
            (await e.mountpointPods()).map((x) => x.spec.nodeName),
            [other],
            "still one Mountpoint Pod, on the other node",
          );
        },
      );
      await step(`${drained} uncordoned; writers deleted: released, nothing mounted`, async () => {
        await cordon(drained, false);
        await e.deletePod(pinned);
        await e.deleteDeployment(app);
        await e.waitReleased(90_000);
        for (const n of [drained, other]) assert.deepEqual(await e.fuseMountsOn(n), [], n);
      });
    } finally {
      for (const n of cordoned) await e.cordon(n, false).catch(() => {});
      await e.deletePod(pinned).catch(() => {});
      await e.deleteDeployment(app).catch(() => {});
      await e.dropVolume(vol);
      await e.dropBucket(bucket);
    }
  },
};
