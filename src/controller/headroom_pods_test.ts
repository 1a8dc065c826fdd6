import assert from "node:assert/strict";
import type { Pod } from "../kube/types.ts";
import { GATE_RESERVE_HEADROOM } from "../mppod/labels.ts";
import {
  hasHeadroomGate,
  headroomEnabled,
  mountpointReservation,
  pinToNodePatch,
  placementPod,
  podRequests,
  requestQuantities,
  ungatePatch,
} from "./headroom_pods.ts";

const CONFIG = {
  namespace: "mount-s3",
  image: "pause:3.10",
  priorityClassName: "mount-s3-headroom",
  preemptingPriorityClassName: "mount-s3-preempting",
};

function workload(spec: Partial<Pod["spec"]> = {}): Pod {
  return {
    metadata: { name: "w", namespace: "apps", uid: "uid-1", resourceVersion: "7" },
    spec: {
      schedulingGates: [{ name: "other" }, { name: GATE_RESERVE_HEADROOM }],
      containers: [{ name: "a", resources: { requests: { cpu: "100m", memory: "64Mi" } } }],
      ...spec,
    },
  };
}

Deno.test("podRequests(): containers and sidecars, or the largest init container, plus overhead", () => {
  assert.deepEqual(podRequests(workload()), { cpu: 0.1, memory: 64 * 2 ** 20 });
  const w = workload({
    initContainers: [
      { name: "sidecar", restartPolicy: "Always", resources: { requests: { cpu: "50m" } } },
      { name: "init", resources: { requests: { cpu: "1", memory: "1Mi" } } },
    ],
    containers: [
      { name: "a", resources: { requests: { cpu: "100m", memory: "64Mi" } } },
      { name: "b", resources: { requests: { cpu: "200m" } } },
      { name: "none" },
    ],
    overhead: { cpu: "10m", memory: "1Mi" },
  });
  const r = podRequests(w);
  assert.equal(Math.round(r.cpu * 1000), 1010, "init 1 core beats 350m of containers, + overhead");
  assert.equal(r.memory, 65 * 2 ** 20, "containers' 64Mi beat the init's 1Mi, + overhead");
});

Deno.test("requestQuantities(): millicores and bytes, rounded up", () => {
  assert.deepEqual(requestQuantities({ cpu: 0.25, memory: 1.5 }), { cpu: "250m", memory: "2" });
  assert.deepEqual(requestQuantities({ cpu: 0.0001, memory: 0 }), { cpu: "1m", memory: "0" });
});

Deno.test("headroom is on only with both classes and the image; the gate is ours", () => {
  assert.ok(headroomEnabled(CONFIG));
  assert.ok(!headroomEnabled({ ...CONFIG, image: "" }));
  assert.ok(!headroomEnabled({ ...CONFIG, preemptingPriorityClassName: "" }));
  assert.ok(!headroomEnabled(undefined));
  assert.ok(hasHeadroomGate(workload()));
  assert.ok(!hasHeadroomGate(workload({ schedulingGates: [{ name: "other" }] })));
});

Deno.test("placementPod(): the workload's scheduling constraints, its requests plus the Mountpoint Pods'", () => {
  const w = workload({
    nodeSelector: { disk: "ssd" },
    affinity: { nodeAffinity: { x: 1 }, podAntiAffinity: { y: 2 } },
    tolerations: [{ key: "k", operator: "Exists" }],
  });
  const p = placementPod(CONFIG, w, { cpu: 0.05, memory: 64 * 2 ** 20 });
  assert.equal(p.metadata.namespace, "mount-s3");
  assert.match(p.metadata.name!, /^hr-[0-9a-f]{40}$/);
  assert.equal(p.spec.priorityClassName, "mount-s3-headroom");
  assert.deepEqual(p.spec.nodeSelector, { disk: "ssd" });
  assert.deepEqual(p.spec.affinity, { nodeAffinity: { x: 1 } }, "node affinity only");
  assert.deepEqual(p.spec.tolerations, [{ key: "k", operator: "Exists" }]);
  assert.deepEqual(p.spec.containers[0]!.resources, {
    requests: { cpu: "150m", memory: String(128 * 2 ** 20) },
  });
  assert.equal(p.spec.containers[0]!.image, "pause:3.10");
  assert.equal(p.spec.terminationGracePeriodSeconds, 0);
  assert.equal(p.spec.automountServiceAccountToken, false);
  assert.equal(p.spec.securityContext?.runAsNonRoot, true);
  const m = mountpointReservation(CONFIG, w, "n1", "node-uid", { cpu: 0.05, memory: 1 }, []);
  assert.equal(m.metadata.name, `${p.metadata.name}-mp`);
  assert.deepEqual(m.metadata.ownerReferences, [
    { apiVersion: "v1", kind: "Node", name: "n1", uid: "node-uid", controller: true },
  ]);
});

Deno.test("pinToNodePatch(): node affinity narrowed to the node, our gate removed, at the read version", () => {
  const pin = { key: "metadata.name", operator: "In", values: ["n1"] };
  assert.deepEqual(pinToNodePatch(workload(), "n1"), {
    metadata: { resourceVersion: "7" },
    spec: {
      schedulingGates: [{ name: "other" }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchFields: [pin] }],
          },
        },
      },
    },
  });
  // Existing terms: each gets the pin (a gated pod's terms may only get more requirements).
  const term = (zone: string) => ({
    matchExpressions: [{ key: "zone", operator: "In", values: [zone] }],
  });
  const w = workload({
    schedulingGates: [{ name: GATE_RESERVE_HEADROOM }],
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [term("a"), term("b")],
        },
        preferredDuringSchedulingIgnoredDuringExecution: [],
      },
    },
  });
  const patch = pinToNodePatch(w, "n1") as { spec: Record<string, unknown> };
  assert.equal(patch.spec.schedulingGates, null, "no gate left");
  assert.deepEqual(
    (patch.spec.affinity as {
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: unknown };
    })
      .nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution,
    {
      nodeSelectorTerms: [{ ...term("a"), matchFields: [pin] }, {
        ...term("b"),
        matchFields: [pin],
      }],
    },
  );
  assert.deepEqual(ungatePatch(workload()), {
    metadata: { resourceVersion: "7" },
    spec: { schedulingGates: [{ name: "other" }] },
  });
});
