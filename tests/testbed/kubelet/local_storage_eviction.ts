/**
 * The kubelet's local-storage eviction, as v1.32 does it in `localStorageEviction`
 * (`pkg/kubelet/eviction/eviction_manager.go` of `k8s.io/kubernetes`), for one pod, in that order:
 *
 * 1. an `emptyDir` volume with a `sizeLimit` using more than it
 *    ("Usage of EmptyDir volume "work" exceeds the limit "256Mi". ");
 * 2. the pod using more ephemeral storage than the sum of its containers' `ephemeral-storage`
 *    limits, counting its containers' logs and its disk-backed emptyDirs (tmpfs ones are memory)
 *    ("Pod ephemeral local storage usage exceeds the total limit of containers 384Mi. ");
 * 3. a container's own usage (its logs here: the emulator has no writable layer) over its limit.
 *
 * The pod is then evicted: its containers killed at once, its phase `Failed` with reason `Evicted`
 * and that message, an `Evicted` Warning event; the object stays until someone deletes it. Usage
 * is what the files occupy on disk (allocated blocks, as `du`), measured every `evictionMs`
 * (the kubelet's housekeeping is 10 s).
 *
 * @module
 */
import { bytesQuantity, nonNegativeQuantity } from "../../../src/kube/quantity.ts";
import type { Pod } from "./k8s_types.ts";

/** What the pod occupies on the node's disk, in bytes. */
export interface LocalStorageUsage {
  /** Per emptyDir volume name. */
  readonly volumes: ReadonlyMap<string, number>;
  /** Per container name: its logs (and writable layer, none here). */
  readonly containers: ReadonlyMap<string, number>;
}

/** Reason of an evicted pod's status. */
export const EVICTED = "Evicted";

function limitOf(q: unknown): number | undefined {
  return typeof q === "string" || typeof q === "number"
    ? nonNegativeQuantity(String(q))
    : undefined;
}

interface EmptyDirVolume {
  name: string;
  emptyDir?: { medium?: string; sizeLimit?: string };
}

interface Limited {
  name: string;
  resources?: { limits?: Record<string, unknown> };
}

/** The eviction message when the pod's usage breaks a limit, else undefined. */
export function localStorageViolation(pod: Pod, usage: LocalStorageUsage): string | undefined {
  const volumes = (pod.spec.volumes ?? []) as EmptyDirVolume[];
  for (const v of volumes) {
    const limit = limitOf(v.emptyDir?.sizeLimit);
    if (limit === undefined) continue;
    const used = usage.volumes.get(v.name) ?? 0;
    if (used > limit) {
      return `Usage of EmptyDir volume "${v.name}" exceeds the limit "${v.emptyDir!.sizeLimit}". `;
    }
  }
  const containers = pod.spec.containers as Limited[];
  const limits = containers.map((c) => limitOf(c.resources?.limits?.["ephemeral-storage"]));
  if (limits.some((l) => l !== undefined)) {
    const total = limits.reduce<number>((a, l) => a + (l ?? 0), 0);
    let used = [...usage.containers.values()].reduce((a, b) => a + b, 0);
    for (const v of volumes) {
      if (v.emptyDir && v.emptyDir.medium !== "Memory") used += usage.volumes.get(v.name) ?? 0;
    }
    if (used > total) {
      return `Pod ephemeral local storage usage exceeds the total limit of containers ${
        bytesQuantity(total)
      }. `;
    }
  }
  for (const [i, c] of containers.entries()) {
    const limit = limits[i];
    if (limit !== undefined && (usage.containers.get(c.name) ?? 0) > limit) {
      return `Container ${c.name} exceeded its local ephemeral storage limit "${
        c.resources!.limits!["ephemeral-storage"]
      }". `;
    }
  }
  return undefined;
}

/** Bytes allocated on disk under `path` (regular files and dirs, links not followed; 0 if absent). */
export async function diskUsage(path: string): Promise<number> {
  const info = await Deno.lstat(path).catch(() => undefined);
  if (!info) return 0;
  let bytes = (info.blocks ?? 0) * 512;
  if (info.isDirectory) {
    const names: string[] = [];
    try {
      for await (const e of Deno.readDir(path)) names.push(e.name);
    } catch {
      return bytes;
    }
    for (const n of names) bytes += await diskUsage(`${path}/${n}`);
  }
  return bytes;
}
