import assert from "node:assert/strict";
import { FakeKubeClient } from "../../../src/kube/fake_client.ts";
import type { KubeObject } from "../../../src/kube/client.ts";
import { NODES, PODS, type Resource } from "../../../src/kube/resources.ts";
import type { Node, Pod } from "../kubelet/k8s_types.ts";
import { pickNode, Scheduler } from "./scheduler.ts";

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

/** The fake, plus the server side of `pods/<name>/binding`: records the POST, sets nodeName. */
class BindingFake extends FakeKubeClient {
  readonly bindings: string[] = [];
  override async create<T extends KubeObject>(r: Resource, obj: T): Promise<T> {
    const m = /^pods\/(.+)\/binding$/.exec(r.plural);
    if (!m) return await super.create(r, obj);
    const target = (obj as { target?: { name?: string } }).target?.name ?? "";
    this.bindings.push(`${r.kind} ${obj.metadata?.namespace}/${m[1]} → ${target}`);
    await this.patch(PODS, m[1]!, obj.metadata?.namespace, { spec: { nodeName: target } });
    return obj;
  }
}

Deno.test("Scheduler binds with pods/binding or a spec.nodeName patch, only in its namespaces", async () => {
  for (const bind of ["binding", "patch"] as const) {
    const c = new BindingFake();
    await c.create(NODES, node("n1"));
    await c.create(PODS, pod());
    await c.create(PODS, { ...pod(), metadata: { name: "p", namespace: "other", uid: "u2" } });
    const s = new Scheduler(c, { bind, namespaces: ["ns"] });
    await s.start(5000);
    try {
      const deadline = Date.now() + 5000;
      while ((await c.get<Pod>(PODS, "p", "ns"))?.spec.nodeName !== "n1") {
        assert.ok(Date.now() < deadline, `${bind}: not bound within 5 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.deepEqual(c.bindings, bind === "binding" ? ["Binding ns/p → n1"] : []);
      assert.equal((await c.get<Pod>(PODS, "p", "other"))?.spec.nodeName, undefined);
    } finally {
      await s.stop();
    }
  }
});
