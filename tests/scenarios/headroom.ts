/**
 * Headroom for Mountpoint Pods (`src/controller/headroom.ts`) on a node filled to its allocatable
 * CPU by a filler pod (priority 0):
 *
 * - without opt-in nothing changes: a workload that fits alone lands, and its Mountpoint Pod
 *   (non-preempting class) cannot be scheduled — the workload waits for its volume;
 * - a workload with the scheduling gate `s3.csi.scality.com/reserve-headroom-for-mppod` never lands
 *   there: its placement headroom pod (room for it and its Mountpoint Pod) stays Pending, and so
 *   does the workload, with an Event saying why;
 * - once the node has room for both, the placement pod is scheduled, the workload is pinned to
 *   that node and ungated, its Mountpoint Pod preempts the mountpoint headroom pod, the workload
 *   writes through its volume, and the headroom pods are gone.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import { EVENTS, NODES, PODS } from "../../src/kube/resources.ts";
import { podRequests } from "../../src/controller/headroom_pods.ts";
import type { Pod as ApiPod } from "../../src/kube/types.ts";
import {
  COMPONENT_HEADROOM_POD,
  DEFAULT_MOUNTPOINT_NAMESPACE,
  GATE_RESERVE_HEADROOM,
  LABEL_COMPONENT,
  LABEL_HEADROOM_ROLE,
} from "../../src/mppod/labels.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { type KubeEvent, type Scenario, type ScenarioCluster, unique } from "./cluster.ts";
import { checkWrites, writerScript } from "./writer.ts";

/** CPU (millicores) the workloads request. */
const WORKLOAD_MILLI = 200;
/** CPU (millicores) a Mountpoint Pod requests (the deploy default, `mountpointPod.resources`). */
const MOUNTPOINT_MILLI = 50;

/** Free CPU (millicores) of a node: allocatable minus the requests of the pods bound to it. */
async function freeMilli(e: ScenarioCluster, node: string): Promise<number> {
  const n = await e.client.get<KubeObject & { status?: { allocatable?: { cpu?: string } } }>(
    NODES,
    node,
  );
  const cpu = n?.status?.allocatable?.cpu ?? "0";
  const allocatable = cpu.endsWith("m") ? Number(cpu.slice(0, -1)) : Number(cpu) * 1000;
  const used = (await e.podsOn(node)).filter((p) =>
    p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed"
  ).reduce((sum, p) => sum + podRequests(p as unknown as ApiPod).cpu * 1000, 0);
  return Math.floor(allocatable - used);
}

/** Events of the pod named `name` in `namespace` with `reason`. */
async function eventsOf(
  e: ScenarioCluster,
  namespace: string,
  name: string,
  reason: string,
): Promise<KubeEvent[]> {
  return (await e.client.list<KubeEvent>(EVENTS, { namespace })).items.filter((x) =>
    x.involvedObject?.name === name && x.reason === reason
  );
}

/** The scenario. */
export const HEADROOM: Scenario = {
  name:
    "headroom: a workload that opts in never lands where its Mountpoint Pod cannot be scheduled",
  nodes: 1,
  realNodeOnly: true,
  async run(e, step) {
    const node = e.nodeNames()[0]!;
    const bucket = await e.bucket("headroom");
    const vol = `headroom-${unique()}`;
    const filler = `headroom-filler-${unique()}`;
    const spacer = `headroom-spacer-${unique()}`;
    const plain = `headroom-plain-${unique()}`;
    const gated = `headroom-gated-${unique()}`;
    const pods = [filler, spacer, plain, gated];
    /** A filler pod of `milli` CPU on the node, running. */
    const fill = async (name: string, milli: number) => {
      assert.ok(milli > 0, `the node has not enough CPU free for the scenario`);
      const p = await e.pod({
        name,
        node,
        volumes: [],
        script: "exec sleep 3600",
        requests: { cpu: `${milli}m` },
      });
      await e.waitPhase(p, ["Running"]);
    };
    const writer = (name: string, gate: boolean) =>
      e.pod({
        name,
        node,
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: writerScript(),
        env: { POD_NAME: name },
        requests: { cpu: `${WORKLOAD_MILLI}m` },
        ...(gate ? { schedulingGates: [GATE_RESERVE_HEADROOM] } : {}),
      });
    const headroomPods = async () =>
      (await e.client.list<Pod>(PODS, {
        namespace: DEFAULT_MOUNTPOINT_NAMESPACE,
        labelSelector: `${LABEL_COMPONENT}=${COMPONENT_HEADROOM_POD}`,
      })).items;
    try {
      await e.staticVolume(vol, { bucket });
      const tight = WORKLOAD_MILLI + MOUNTPOINT_MILLI / 2;
      const room = WORKLOAD_MILLI + MOUNTPOINT_MILLI + 10;
      await step(
        `without opt-in nothing changes: node filled to ${tight}m free, the workload lands, its Mountpoint Pod cannot be scheduled`,
        async () => {
          // The filler leaves `room`, a spacer takes `room - tight` of it (deleted later: the room
          // grows at once, without a moment of more).
          await fill(filler, (await freeMilli(e, node)) - room);
          await fill(spacer, room - tight);
          assert.equal(await freeMilli(e, node), tight);
          const p = await writer(plain, false);
          const mp = await waitFor(
            "the workload bound and its Mountpoint Pod created",
            async () => {
              const got = await e.client.get<Pod>(PODS, plain, e.ns);
              return got?.spec.nodeName && await e.mountpointPodOf(p);
            },
            { timeoutMs: 60_000, intervalMs: 250 },
          );
          await waitFor(`Mountpoint Pod ${mp} unschedulable`, async () => {
            const m = await e.client.get<Pod>(PODS, mp, DEFAULT_MOUNTPOINT_NAMESPACE);
            return m?.status?.conditions?.some((c) =>
              c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable"
            );
          }, { timeoutMs: 60_000, intervalMs: 250 });
          assert.equal(await e.log(p), "", "the workload never started: no volume");
          await e.deletePod(plain);
          await e.waitReleased(60_000);
        },
      );
      await step(
        `a workload with the gate ${GATE_RESERVE_HEADROOM} does not land there: its placement headroom pod and the workload stay Pending`,
        async () => {
          const p = await writer(gated, true);
          const pending = await waitFor(
            "a HeadroomPending event on the workload",
            async () => (await eventsOf(e, e.ns, gated, "HeadroomPending"))[0],
            {
              timeoutMs: 60_000,
              intervalMs: 250,
            },
          );
          assert.match(pending.message ?? "", /Insufficient cpu/);
          const pendingMessage = pending.message ?? "";
          const hr = await headroomPods();
          assert.equal(hr.length, 1, "one placement pod");
          assert.equal(hr[0]!.metadata.labels?.[LABEL_HEADROOM_ROLE], "placement");
          assert.equal(hr[0]!.spec.nodeName, undefined, "the placement pod is not scheduled");
          const got = (await e.client.get<Pod>(PODS, gated, e.ns))!;
          assert.equal(got.spec.nodeName, undefined, "the workload is not scheduled");
          assert.equal(await e.mountpointPodOf(p), undefined, "no Mountpoint Pod");
          return pendingMessage.replace(/^.*?: (?=\d+\/\d+ nodes)/, "");
        },
      );
      await step(
        `room for both (${room}m): the workload is pinned and runs, its Mountpoint Pod preempted the mountpoint headroom pod, no headroom pod is left`,
        async () => {
          await e.deletePod(spacer);
          const p = (await e.client.get<Pod>(PODS, gated, e.ns))!;
          await e.waitLog(p, "CLOSED 3", 120_000);
          const got = (await e.client.get<ApiPod>(PODS, gated, e.ns))!;
          assert.equal(got.spec.nodeName, node);
          assert.equal(got.spec.schedulingGates, undefined, "ungated");
          assert.match(JSON.stringify(got.spec.affinity), new RegExp(`"values":\\["${node}"\\]`));
          const mpName = await e.mountpointPodOf(p);
          const mp = (await e.mountpointPods()).find((x) => x.metadata.name === mpName);
          assert.ok(mp, "its Mountpoint Pod");
          const preempted = (await e.client.list<KubeEvent>(EVENTS, {
            namespace: DEFAULT_MOUNTPOINT_NAMESPACE,
          })).items.filter((x) =>
            x.reason === "Preempted" && /-mp$/.test(x.involvedObject?.name ?? "")
          );
          assert.equal(preempted.length, 1, "the mountpoint headroom pod was preempted");
          assert.match(
            preempted[0]!.message ?? "",
            new RegExp(mp.metadata.uid),
            "by the Mountpoint Pod",
          );
          assert.ok((await eventsOf(e, e.ns, gated, "HeadroomReserved")).length, "reserved");
          await waitFor("no headroom pod left", async () => !(await headroomPods()).length, {
            timeoutMs: 60_000,
            intervalMs: 250,
          });
        },
      );
      await step("workloads deleted: released, their writes in S3, nothing mounted", async () => {
        await e.deletePod(gated);
        await e.deletePod(filler);
        await e.deletePod(spacer).catch(() => {});
        await e.waitReleased(90_000);
        await checkWrites(e, bucket, gated, 4);
        assert.deepEqual(await e.fuseMountsOn(node), []);
      });
    } finally {
      for (const p of pods) await e.deletePod(p).catch(() => {});
      for (const h of await headroomPods().catch(() => [])) {
        await e.client.delete(PODS, h.metadata.name, DEFAULT_MOUNTPOINT_NAMESPACE).catch(() =>
          false
        );
      }
      await e.dropVolume(vol);
      await e.dropBucket(bucket);
    }
  },
};
