/**
 * `deno task undeploy`: delete the deployment's objects in reverse apply order.
 *
 * By default the CRD, the attachments (S3PAs) and the Mountpoint namespace stay: Mountpoint Pods
 * are the FUSE servers of volumes that are still mounted, and the CRD's deletion would delete every
 * attachment. `--purge` deletes them too. While attachments exist (volumes are mounted) undeploy
 * refuses unless forced: without the node plugin and controller, new mounts and unmounts stop.
 *
 * @module
 */
import type { KubeClient } from "../kube/client.ts";
import { ApiError } from "../kube/errors.ts";
import { S3PAS } from "../api/mountpoint_s3_pod_attachment.ts";
import { errorMessage } from "../util/errors.ts";
import type { Manifest } from "./k8s_objects.ts";
import { describe, inApplyOrder, resourceOf } from "./kinds.ts";
import { CRDS } from "../kube/resources.ts";
import { pause } from "../util/sleep.ts";

/** Undeploy refused because volumes are mounted. */
export class VolumesMountedError extends Error {
  /** Build from the attachment names. */
  constructor(readonly attachments: readonly string[]) {
    super(
      `${attachments.length} MountpointS3PodAttachment(s) exist, so volumes are mounted ` +
        `(${attachments.slice(0, 5).join(", ")}${attachments.length > 5 ? ", …" : ""}); ` +
        "unmount them first (delete the workloads) or pass --force",
    );
    this.name = "VolumesMountedError";
  }
}

/** What happened to one object. */
export interface DeleteOutcome {
  /** The object, as `Kind namespace/name`. */
  readonly object: string;
  /** What was done. */
  readonly action: "deleted" | "absent" | "kept" | "would delete";
}

/** Options of {@link undeploy}. */
export interface UndeployOptions {
  /** Kubernetes API client. */
  readonly client: KubeClient;
  /** Rendered objects (any order). */
  readonly objects: readonly Manifest[];
  /** Also delete the CRD (and so every attachment) and the Mountpoint namespace. */
  readonly purge?: boolean;
  /** Proceed although attachments exist. */
  readonly force?: boolean;
  /** Read only: report what would happen. */
  readonly dryRun?: boolean;
  /** Wait (bounded) until the deleted objects are gone. */
  readonly wait?: boolean;
  /** Bound of the wait, in milliseconds. */
  readonly waitTimeoutMs?: number;
  /** Receives one line per progress step. */
  readonly progress?: (line: string) => void;
  /** Aborts the work early. */
  readonly signal?: AbortSignal;
}

/** Result of {@link undeploy}. */
export interface UndeployReport {
  /** One entry per object, in order. */
  readonly outcomes: readonly DeleteOutcome[];
  /** How many S3PAs existed. */
  readonly attachments: number;
  /** Objects still present when the wait ended. */
  readonly remaining: readonly string[];
}

/** Names of the existing S3PAs; none when the CRD is not installed. */
export async function listAttachments(client: KubeClient, signal?: AbortSignal): Promise<string[]> {
  try {
    const { items } = await client.list(S3PAS, signal ? { signal } : {});
    return items.map((i) => i.metadata?.name ?? "");
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return [];
    throw err;
  }
}

/** Is `obj` kept unless purging? */
function keptWithoutPurge(obj: Manifest, mountpointNamespace: string | undefined): boolean {
  if (resourceOf(obj) === CRDS) return true;
  return obj.kind === "Namespace" && obj.metadata.name === mountpointNamespace;
}

/** Delete; see the module doc. @throws {VolumesMountedError} */
export async function undeploy(o: UndeployOptions): Promise<UndeployReport> {
  const progress = o.progress ?? (() => {});
  const call = o.signal ? { signal: o.signal } : {};
  const attachments = await listAttachments(o.client, o.signal);
  if (attachments.length && !o.force) throw new VolumesMountedError(attachments);
  const mpNamespace = o.objects.find((x) =>
    x.kind === "Namespace" && x.metadata.labels?.["pod-security.kubernetes.io/enforce"]
  )?.metadata.name;
  const outcomes: DeleteOutcome[] = [];
  const deleted: Manifest[] = [];
  for (const obj of inApplyOrder(o.objects).reverse()) {
    const what = describe(obj);
    if (!o.purge && keptWithoutPurge(obj, mpNamespace)) {
      outcomes.push({ object: what, action: "kept" });
      continue;
    }
    if (o.dryRun) {
      outcomes.push({ object: what, action: "would delete" });
      continue;
    }
    let gone: boolean;
    try {
      gone = await o.client.delete(resourceOf(obj), obj.metadata.name, obj.metadata.namespace, {
        propagationPolicy: "Background",
        ...call,
      });
    } catch (err) {
      // The object's namespace is already gone (deleted earlier in this run or by someone else).
      if (err instanceof ApiError && err.status === 404) gone = false;
      else throw new Error(`deleting ${what} failed: ${errorMessage(err)}`, { cause: err });
    }
    outcomes.push({ object: what, action: gone ? "deleted" : "absent" });
    if (gone) deleted.push(obj);
    progress(`${what} ${gone ? "deleted" : "absent"}`);
  }
  let remaining: string[] = [];
  if (!o.dryRun && o.wait !== false && deleted.length) {
    const deadline = Date.now() + (o.waitTimeoutMs ?? 120_000);
    for (;;) {
      remaining = [];
      for (const obj of deleted) {
        const still = await o.client.get(
          resourceOf(obj),
          obj.metadata.name,
          obj.metadata.namespace,
          call,
        )
          .catch(() => undefined);
        if (still) remaining.push(describe(obj));
      }
      if (!remaining.length || Date.now() > deadline || o.signal?.aborted) break;
      progress(`waiting for ${remaining.length} object(s) to finish terminating: ${remaining[0]}…`);
      await pause(1000, o.signal);
    }
  }
  return { outcomes, attachments: attachments.length, remaining };
}
