/**
 * Removal of the node taint `s3.csi.scality.com/agent-not-ready` once the node plugin serves CSI
 * calls, so the scheduler starts placing S3 workloads on the node. The removal is an atomic JSON
 * patch (`test` the key at the index, then `remove`), retried with backoff on conflicts.
 *
 * @module
 */
import type { KubeClient, KubeObject } from "../kube/client.ts";
import { NODES } from "../kube/resources.ts";
import { TAINT_AGENT_NOT_READY } from "../mppod/labels.ts";
import { errorMessage } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { sleep } from "../util/sleep.ts";

const log = logger("node", "taint");

interface NodeObject extends KubeObject {
  spec?: { taints?: { key?: string; effect?: string }[] };
}

/** Options of {@link removeAgentNotReadyTaint}. */
export interface TaintOptions {
  /** Attempts before giving up. @default 8 */
  readonly attempts?: number;
  /** First backoff. @default 500 */
  readonly backoffMs?: number;
  readonly signal?: AbortSignal;
}

/** Remove the taint from `nodeName`. Resolves `"removed"`, `"absent"` or `"failed"`. */
export async function removeAgentNotReadyTaint(
  kube: KubeClient,
  nodeName: string,
  options: TaintOptions = {},
): Promise<"removed" | "absent" | "failed"> {
  let backoff = options.backoffMs ?? 500;
  const attempts = options.attempts ?? 8;
  for (let i = 0; i < attempts && !options.signal?.aborted; i++) {
    try {
      const node = await kube.get<NodeObject>(NODES, nodeName);
      const taints = node?.spec?.taints ?? [];
      const index = taints.findIndex((t) => t.key === TAINT_AGENT_NOT_READY);
      if (!node || index < 0) return "absent";
      await kube.patch(NODES, nodeName, undefined, [
        { op: "test", path: `/spec/taints/${index}/key`, value: TAINT_AGENT_NOT_READY },
        { op: "remove", path: `/spec/taints/${index}` },
      ], { type: "json" });
      log.info("Removed taint {taint} from node {node}", {
        taint: TAINT_AGENT_NOT_READY,
        node: nodeName,
      });
      return "removed";
    } catch (err) {
      log.warn("Removing taint {taint} failed (attempt {attempt}): {error}", {
        taint: TAINT_AGENT_NOT_READY,
        attempt: i + 1,
        error: errorMessage(err),
      });
      await sleep(backoff, options.signal);
      backoff = Math.min(backoff * 2, 10_000);
    }
  }
  return "failed";
}
