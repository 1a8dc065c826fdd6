/**
 * Shared types and helpers of the Kubernetes API contract cases.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KubeHttp } from "../testbed/harness/kube_http.ts";

/** Per-case context. */
export interface CaseContext {
  /** A namespace that exists for this case. */
  readonly ns: string;
  /** Unique suffix for cluster-scoped names. */
  readonly id: string;
}

/** One contract case. */
export interface ContractCase {
  /** Test name. */
  readonly name: string;
  /** Body. */
  readonly run: (k: KubeHttp, ctx: CaseContext) => Promise<void>;
}

/** Path of configmaps (or one configmap). */
export const CM = (ns: string, name = ""): string =>
  `/api/v1/namespaces/${ns}/configmaps${name ? `/${name}` : ""}`;
/** Path of pods (or one pod). */
export const PODS = (ns: string, name = ""): string =>
  `/api/v1/namespaces/${ns}/pods${name ? `/${name}` : ""}`;
/** kubectl's Accept header for Table output. */
export const TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/** A ConfigMap manifest. */
export function cm(
  name: string,
  labels: Record<string, string> = {},
  data: Record<string, string> = {},
): Record<string, unknown> {
  return { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels }, data };
}

/** A Pod manifest, bound to `nodeName` if given. */
export function pod(name: string, nodeName?: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      ...(nodeName ? { nodeName } : {}),
      automountServiceAccountToken: false,
      containers: [{ name: "main", image: "busybox:1.36" }],
    },
  };
}

/** Poll until `fn` returns a value, bounded by `timeoutMs`. */
export async function poll<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Create a pod, retrying while the namespace's default ServiceAccount does not exist yet. */
// deno-lint-ignore no-explicit-any
export async function createPod(k: KubeHttp, ns: string, body: unknown): Promise<any> {
  return await poll("pod create", async () => {
    const r = await k.request("POST", PODS(ns), { body });
    if (r.status === 201) return r.body;
    if (r.status === 403 && /service account/.test(r.text)) return undefined;
    assert.fail(`create pod: ${r.status} ${r.text}`);
  });
}

/** Assert a Failure Status with `code` and `reason`. */
export function statusOf(
  r: { status: number; body: Record<string, unknown> },
  code: number,
  reason: string,
): void {
  assert.equal(r.status, code, JSON.stringify(r.body));
  assert.equal(r.body.kind, "Status");
  assert.equal(r.body.status, "Failure");
  assert.equal(r.body.reason, reason);
  assert.equal(r.body.code, code);
}
