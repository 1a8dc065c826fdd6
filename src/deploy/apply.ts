/**
 * `deno task deploy`: server-side apply of every rendered object, in order, with one field
 * manager; the CRD must be Established before anything else; then (optionally) a bounded wait for
 * the workloads to roll out.
 *
 * Each object is read before it is applied, so the report can say `created`, `configured` or
 * `unchanged` (resourceVersion the same before and after: the API server found nothing to change).
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../kube/client.ts";
import { ApiError } from "../kube/errors.ts";
import { errorMessage, TimeoutError } from "../util/errors.ts";
import type { Manifest } from "./k8s_objects.ts";
import { describe, resourceOf } from "./kinds.ts";
import { CRDS } from "../kube/resources.ts";
import { FIELD_MANAGER } from "./names.ts";
import { type RolloutStatus, waitForRollout } from "./rollout.ts";
import { pause } from "../util/sleep.ts";

/** What applying one object did. */
export type ApplyAction = "created" | "configured" | "unchanged" | "would create" | "would apply";

/** One line of the report. */
export interface ApplyOutcome {
  /** The object, as `Kind namespace/name`. */
  readonly object: string;
  /** What was done. */
  readonly action: ApplyAction;
  /** resourceVersion after the apply. */
  readonly resourceVersion?: string;
}

/** Result of {@link deploy}. */
export interface DeployReport {
  /** One entry per object, in order. */
  readonly outcomes: readonly ApplyOutcome[];
  /** Workload status after the wait; empty when not waited. */
  readonly rollout: readonly RolloutStatus[];
  /** True when every workload rolled out (or no wait was asked). */
  readonly rolledOut: boolean;
}

/** Options of {@link deploy}. */
export interface DeployOptions {
  /** Kubernetes API client. */
  readonly client: KubeClient;
  /** Rendered objects in apply order. */
  readonly objects: readonly Manifest[];
  /** Server-side apply field manager (default `s3-csi-deploy`). */
  readonly fieldManager?: string;
  /** Read only: report what would be created or applied. */
  readonly dryRun?: boolean;
  /** Wait for the Deployment and DaemonSet (default true). */
  readonly wait?: boolean;
  /** Bound of the wait, in milliseconds. */
  readonly waitTimeoutMs?: number;
  /** Bound of the wait for the CRD to be Established. */
  readonly crdTimeoutMs?: number;
  /** One line per progress step. */
  readonly progress?: (line: string) => void;
  /** Aborts the work early. */
  readonly signal?: AbortSignal;
}

/** An object the API server refused; names the object and keeps the server's message. */
export class ApplyError extends Error {
  /** Build for `object`. */
  constructor(readonly object: string, cause: unknown) {
    super(`applying ${object} failed: ${errorMessage(cause)}`, { cause });
    this.name = "ApplyError";
  }
}

interface CrdStatus {
  status?: { conditions?: { type: string; status: string; message?: string }[] };
}

/** Wait (bounded) until the CRD `name` is Established. @throws {TimeoutError} */
export async function waitForCrd(
  client: KubeClient,
  name: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const crd = await client.get<KubeObject & CrdStatus>(CRDS, name, undefined, {
      ...(signal ? { signal } : {}),
    });
    const conds = crd?.status?.conditions ?? [];
    if (conds.some((c) => c.type === "Established" && c.status === "True")) return;
    const refused = conds.find((c) => c.type === "NamesAccepted" && c.status === "False");
    if (refused) throw new ApplyError(`CustomResourceDefinition ${name}`, refused.message);
    if (Date.now() > deadline) throw new TimeoutError(`CRD ${name} to be Established`, timeoutMs);
    await pause(200, signal);
  }
}

/** Apply everything; see the module doc. @throws {ApplyError} {TimeoutError} */
export async function deploy(o: DeployOptions): Promise<DeployReport> {
  const progress = o.progress ?? (() => {});
  const manager = o.fieldManager ?? FIELD_MANAGER;
  const outcomes: ApplyOutcome[] = [];
  const call = o.signal ? { signal: o.signal } : {};
  for (const obj of o.objects) {
    const r = resourceOf(obj);
    const what = describe(obj);
    let before: KubeObject | undefined;
    try {
      before = await o.client.get(r, obj.metadata.name, obj.metadata.namespace, call);
    } catch (err) {
      // A namespace applied earlier in a dry run does not exist yet: the object would be created.
      if (!(o.dryRun && err instanceof ApiError && err.status === 404)) {
        throw new ApplyError(what, err);
      }
    }
    if (o.dryRun) {
      outcomes.push({ object: what, action: before ? "would apply" : "would create" });
      continue;
    }
    let after: KubeObject;
    try {
      after = await o.client.patch(r, obj.metadata.name, obj.metadata.namespace, obj, {
        type: "apply",
        fieldManager: manager,
        force: true,
        ...call,
      });
    } catch (err) {
      throw new ApplyError(what, err);
    }
    const rv = after.metadata?.resourceVersion ?? "";
    const action: ApplyAction = !before
      ? "created"
      : before.metadata?.resourceVersion === rv
      ? "unchanged"
      : "configured";
    outcomes.push({ object: what, action, resourceVersion: rv });
    progress(`${what} ${action}`);
    if (r === CRDS) {
      await waitForCrd(o.client, obj.metadata.name, o.crdTimeoutMs ?? 30_000, o.signal);
      progress(`${what} established`);
    }
  }
  if (o.dryRun || o.wait === false) return { outcomes, rollout: [], rolledOut: true };
  const workloads = o.objects.filter((x) => x.kind === "Deployment" || x.kind === "DaemonSet");
  const rollout = await waitForRollout({
    client: o.client,
    workloads,
    timeoutMs: o.waitTimeoutMs ?? 180_000,
    progress,
    ...(o.signal ? { signal: o.signal } : {}),
  });
  return { outcomes, rollout, rolledOut: rollout.every((s) => s.done) };
}
