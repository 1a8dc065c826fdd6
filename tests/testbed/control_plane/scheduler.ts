/**
 * A trivial scheduler: binds every pending pod without `spec.nodeName` (and with the default
 * scheduler name) to the first Ready node, in name order, that satisfies its `nodeSelector`,
 * required node affinity and taints. Binding is a POST of a `Binding` to the `pods/binding`
 * subresource (what kube-scheduler does; a real kube-apiserver accepts nothing else) or, for the API
 * emulator, which has no such subresource, a merge patch of `spec.nodeName`.
 *
 * @module
 */
import type { KubeClient } from "../../../src/kube/client.ts";
import { Informer } from "../../../src/kube/informer.ts";
import { NODES, PODS, type Resource } from "../../../src/kube/resources.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { logger } from "../../../src/util/log.ts";
import type { Node, NodeSelector, Pod, SelectorRequirement } from "../kubelet/k8s_types.ts";

function requirementMatches(r: SelectorRequirement, value: string | undefined): boolean {
  switch (r.operator) {
    case "In":
      return value !== undefined && (r.values ?? []).includes(value);
    case "NotIn":
      return value === undefined || !(r.values ?? []).includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
      return value !== undefined && Number(value) > Number(r.values?.[0]);
    case "Lt":
      return value !== undefined && Number(value) < Number(r.values?.[0]);
  }
}

/** True when `node` satisfies a required node selector (terms are ORed, requirements ANDed). */
export function nodeSelectorMatches(sel: NodeSelector | undefined, node: Node): boolean {
  const terms = sel?.nodeSelectorTerms ?? [];
  if (!terms.length) return true;
  const labels = node.metadata.labels ?? {};
  return terms.some((t) =>
    (t.matchExpressions ?? []).every((r) => requirementMatches(r, labels[r.key])) &&
    (t.matchFields ?? []).every((r) =>
      requirementMatches(r, r.key === "metadata.name" ? node.metadata.name : undefined)
    )
  );
}

/** True when the pod tolerates every NoSchedule/NoExecute taint of the node. */
export function toleratesTaints(pod: Pod, node: Node): boolean {
  return (node.spec?.taints ?? []).filter((t) => t.effect !== "PreferNoSchedule").every((t) =>
    (pod.spec.tolerations ?? []).some((tol) =>
      (!tol.effect || tol.effect === t.effect) &&
      (tol.operator === "Exists"
        ? !tol.key || tol.key === t.key
        : tol.key === t.key && (tol.value ?? "") === (t.value ?? ""))
    )
  );
}

/** True when the node is Ready and schedulable. */
export function nodeReady(node: Node): boolean {
  const conditions = (node.status?.conditions ?? []) as { type: string; status: string }[];
  return !node.spec?.unschedulable &&
    conditions.some((c) => c.type === "Ready" && c.status === "True");
}

/** The node the pod goes to, or undefined. */
export function pickNode(pod: Pod, nodes: readonly Node[]): Node | undefined {
  return [...nodes].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)).find((n) =>
    nodeReady(n) &&
    Object.entries(pod.spec.nodeSelector ?? {}).every(([k, v]) => n.metadata.labels?.[k] === v) &&
    nodeSelectorMatches(
      pod.spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
      n,
    ) &&
    toleratesTaints(pod, n)
  );
}

/** How the scheduler binds a pod to its node. */
export type BindMethod = "binding" | "patch";

/** Options of {@link Scheduler}. */
export interface SchedulerOptions {
  /**
   * `binding`: POST a `Binding` to `pods/<name>/binding` (real kube-apiserver); `patch`: merge
   * patch `spec.nodeName` (the API emulator). @default "patch"
   */
  readonly bind?: BindMethod;
  /** Schedule only the pods of these namespaces (a shared cluster's other pods are left alone). */
  readonly namespaces?: readonly string[];
}

/** The `pods/<name>/binding` subresource as a collection, for a POST through `create`. */
function bindingOf(pod: string): Resource {
  return {
    group: "",
    version: "v1",
    plural: `pods/${encodeURIComponent(pod)}/binding`,
    kind: "Binding",
    namespaced: true,
  };
}

/** The scheduler loop. */
export class Scheduler {
  readonly #client: KubeClient;
  readonly #bind: BindMethod;
  readonly #namespaces: ReadonlySet<string> | undefined;
  readonly #log = logger("sandbox", "scheduler");
  readonly #nodes: Informer<Node>;
  readonly #pods: Informer<Pod>;
  readonly #stop = new AbortController();
  #tasks: Promise<unknown>[] = [];
  #timer: ReturnType<typeof setInterval> | undefined;

  /** Create a scheduler using `client`. */
  constructor(client: KubeClient, options: SchedulerOptions = {}) {
    this.#client = client;
    this.#bind = options.bind ?? "patch";
    this.#nodes = new Informer<Node>(client, NODES);
    this.#namespaces = options.namespaces ? new Set(options.namespaces) : undefined;
    this.#pods = new Informer<Pod>(client, PODS, { fieldSelector: "spec.nodeName=" });
  }

  /** Start watching; pending pods are retried every second. */
  async start(timeoutMs = 30_000): Promise<void> {
    this.#pods.on({
      add: (p) => void this.#schedule(p),
      update: (_o, p) => void this.#schedule(p),
    });
    this.#nodes.on({ add: () => this.#retryAll(), update: () => this.#retryAll() });
    this.#tasks.push(this.#nodes.run(this.#stop.signal), this.#pods.run(this.#stop.signal));
    await this.#nodes.waitForSync(timeoutMs, this.#stop.signal);
    await this.#pods.waitForSync(timeoutMs, this.#stop.signal);
    this.#timer = setInterval(() => this.#retryAll(), 1000);
  }

  #retryAll(): void {
    for (const p of this.#pods.list()) void this.#schedule(p);
  }

  async #schedule(pod: Pod): Promise<void> {
    if (pod.spec.nodeName || pod.metadata.deletionTimestamp) return;
    if (this.#namespaces && !this.#namespaces.has(pod.metadata.namespace)) return;
    if ((pod.spec.schedulerName ?? "default-scheduler") !== "default-scheduler") return;
    const node = pickNode(pod, this.#nodes.list());
    if (!node) return;
    try {
      if (this.#bind === "binding") {
        await this.#client.create(bindingOf(pod.metadata.name), {
          metadata: {
            name: pod.metadata.name,
            namespace: pod.metadata.namespace,
            uid: pod.metadata.uid,
          },
          target: { apiVersion: "v1", kind: "Node", name: node.metadata.name },
        });
      } else {
        await this.#client.patch(PODS, pod.metadata.name, pod.metadata.namespace, {
          metadata: { resourceVersion: pod.metadata.resourceVersion },
          spec: { nodeName: node.metadata.name },
        });
      }
      this.#log.info("Bound pod {pod} to node {node}", {
        pod: `${pod.metadata.namespace}/${pod.metadata.name}`,
        node: node.metadata.name,
      });
    } catch (err) {
      this.#log.debug("Binding {pod} failed: {error}", {
        pod: pod.metadata.name,
        error: errorMessage(err),
      });
    }
  }

  /** Stop watching. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#stop.abort();
    await Promise.allSettled(this.#tasks);
  }
}
