import assert from "node:assert/strict";
import type { Node, Pod } from "./k8s_types.ts";
import { pickNode } from "./scheduler.ts";

const ready = { conditions: [{ type: "Ready", status: "True" }] };
const node = (name: string, extra: Partial<Node> = {}): Node =>
  ({ metadata: { name, labels: { zone: name } }, spec: {}, status: ready, ...extra }) as Node;
const pod = (spec: Partial<Pod["spec"]> = {}): Pod =>
  ({
    metadata: { name: "p", namespace: "ns", uid: "u" },
    spec: { containers: [], ...spec },
  }) as Pod;

Deno.test("picks the first ready node by name that fits selector, affinity and taints", () => {
  const nodes = [node("b"), node("a", { status: {} }), node("c")];
  assert.equal(pickNode(pod(), nodes)?.metadata.name, "b");
  assert.equal(pickNode(pod({ nodeSelector: { zone: "c" } }), nodes)?.metadata.name, "c");
  const pinned = pod({
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{
            matchFields: [{ key: "metadata.name", operator: "In", values: ["c"] }],
          }],
        },
      },
    },
  });
  assert.equal(pickNode(pinned, nodes)?.metadata.name, "c");
  const tainted = [node("t", { spec: { taints: [{ key: "k", effect: "NoSchedule" }] } })];
  assert.equal(pickNode(pod(), tainted), undefined);
  assert.equal(
    pickNode(pod({ tolerations: [{ operator: "Exists" }] }), tainted)?.metadata.name,
    "t",
  );
});
