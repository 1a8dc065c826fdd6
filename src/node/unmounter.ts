/**
 * Clean exit of Mountpoint Pods and clean-up of source mounts.
 *
 * - On every add/update (and the periodic resync) of a Mountpoint Pod of this node annotated
 *   `needs-unmount: "true"`: write `comm/mount.exit`, wait (bounded) until no bind mount uses the
 *   source any more, unmount the source (the engine then exits and the mounter exits 0), remove
 *   the source dir and the credential files. Still in use → retried on the next resync. The comm
 *   dir is the pod's: it is used only through a `DirHandle` (no link followed).
 * - On delete of a Mountpoint Pod, and at startup for every source dir: a source whose pod is gone
 *   (orphaned) or whose mount is dead is unmounted and removed.
 *
 * Every action on a pod runs under the same per-pod lock as publishing.
 *
 * @module
 */
import { ANNOTATION_NEEDS_UNMOUNT, isAnnotatedTrue } from "../mppod/labels.ts";
import { sourceMountDir, sourceMountRoot } from "../mppod/paths.ts";
import type { Files } from "../sys/files.ts";
import { findMount, mountsOfSource } from "../sys/mountinfo.ts";
import type { Sys } from "../sys/sys.ts";
import { errorMessage } from "../util/errors.ts";
import type { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { openCommDir, requestExit } from "./comm_dir.ts";
import { removeCredentials } from "./credentials.ts";
import type { HealthChecker } from "./health.ts";
import type { MountpointPod, MountpointPods } from "./mountpoint_pods.ts";
import { sleep } from "../util/sleep.ts";

const log = logger("node", "unmounter");

/** Options of {@link Unmounter}. */
export interface UnmounterOptions {
  readonly sys: Sys;
  readonly files: Files;
  readonly pods: MountpointPods;
  readonly locks: KeyedMutex;
  readonly health: HealthChecker;
  readonly kubeletRoot: string;
  /** How long to wait for bind mounts of a source to go. @default 30000 */
  readonly inUseWaitMs?: number;
  /** Pause between checks while waiting. @default 250 */
  readonly pollMs?: number;
}

/** What {@link Unmounter.unmountPod} did. */
export type UnmountOutcome = "unmounted" | "in-use" | "not-mounted";

/** Watches Mountpoint Pods and cleans their source mounts. */
export class Unmounter {
  readonly #o: UnmounterOptions;
  readonly #busy = new Set<string>();
  #signal: AbortSignal | undefined;

  /** Create an unmounter; call {@link attach} to react to pod events. */
  constructor(options: UnmounterOptions) {
    this.#o = options;
  }

  /** Subscribe to Mountpoint Pod events. */
  attach(signal: AbortSignal): void {
    this.#signal = signal;
    const check = (pod: MountpointPod) => {
      if (isAnnotatedTrue(pod.metadata?.annotations, ANNOTATION_NEEDS_UNMOUNT)) this.#spawn(pod);
    };
    this.#o.pods.onPod({
      add: check,
      update: (_old, pod) => check(pod),
      delete: (pod) => this.#spawnOrphan(pod.metadata?.name ?? ""),
    });
  }

  #spawn(pod: MountpointPod): void {
    const name = pod.metadata?.name ?? "";
    if (!name || this.#busy.has(name)) return;
    this.#busy.add(name);
    this.unmountPod(pod).catch((err) =>
      log.error("Unmounting Mountpoint Pod {pod} failed: {error}", {
        pod: name,
        error: errorMessage(err),
      })
    ).finally(() => this.#busy.delete(name));
  }

  #spawnOrphan(name: string): void {
    if (!name) return;
    this.cleanOrphan(name).catch((err) =>
      log.error("Cleaning the source of deleted pod {pod} failed: {error}", {
        pod: name,
        error: errorMessage(err),
      })
    );
  }

  /** Clean exit of one pod marked `needs-unmount`. */
  unmountPod(pod: MountpointPod): Promise<UnmountOutcome> {
    const name = pod.metadata?.name ?? "";
    const { sys, files, locks, kubeletRoot } = this.#o;
    return locks.run(name, async () => {
      const uid = pod.metadata?.uid;
      using comm = uid
        ? await openCommDir(files, kubeletRoot, uid).catch((err) => {
          log.warn("Cannot use the comm dir of {pod}: {error}", {
            pod: name,
            error: errorMessage(err),
          });
          return undefined;
        })
        : undefined;
      if (comm) {
        await requestExit(comm).catch((err) =>
          log.warn("Could not ask the mounter of {pod} to exit: {error}", {
            pod: name,
            error: errorMessage(err),
          })
        );
      }
      const source = sourceMountDir(kubeletRoot, name);
      let outcome: UnmountOutcome = "not-mounted";
      const src = findMount(await sys.readMountInfo(), source);
      if (src) {
        if (!(await this.#waitUnused(source))) {
          log.info("Source {source} of {pod} is still in use; will retry", { source, pod: name });
          return "in-use";
        }
        await sys.unmount(source).catch(async (err) => {
          log.warn("Unmount of {source} failed ({error}); detaching", {
            source,
            error: errorMessage(err),
          });
          await sys.unmount(source, { detach: true });
        });
        outcome = "unmounted";
      }
      await files.remove(source).catch(() => {});
      if (comm) await removeCredentials(comm);
      log.info("Mountpoint Pod {pod}: source {outcome}, credentials removed", {
        pod: name,
        outcome,
      });
      return outcome;
    });
  }

  /** Unmount and remove the source of a pod that no longer exists. */
  cleanOrphan(name: string): Promise<boolean> {
    const { sys, files, locks, kubeletRoot } = this.#o;
    return locks.run(name, async () => {
      if (this.#o.pods.pod(name)) return false;
      const source = sourceMountDir(kubeletRoot, name);
      const mounted = findMount(await sys.readMountInfo(), source) !== undefined;
      if (mounted) await sys.unmount(source, { detach: true });
      const removed = await files.remove(source).catch(() => false);
      if (mounted || removed) {
        log.info("Removed orphaned source {source} (Mountpoint Pod gone)", { source });
      }
      return mounted || removed;
    });
  }

  /**
   * Startup clean-up: orphaned sources (no pod) and dead sources (engine gone) are unmounted;
   * pods already marked `needs-unmount` are processed. Returns the names cleaned.
   */
  async cleanAtStartup(): Promise<string[]> {
    const { files, kubeletRoot, pods } = this.#o;
    const cleaned: string[] = [];
    for (const name of await files.readDir(sourceMountRoot(kubeletRoot))) {
      const pod = pods.pod(name);
      if (!pod) {
        if (await this.cleanOrphan(name)) cleaned.push(name);
        continue;
      }
      if (isAnnotatedTrue(pod.metadata?.annotations, ANNOTATION_NEEDS_UNMOUNT)) {
        if ((await this.unmountPod(pod)) === "unmounted") cleaned.push(name);
        continue;
      }
      if (await this.#cleanDead(name)) cleaned.push(name);
    }
    return cleaned;
  }

  async #cleanDead(name: string): Promise<boolean> {
    const { sys, locks, kubeletRoot } = this.#o;
    return await locks.run(name, async () => {
      const source = sourceMountDir(kubeletRoot, name);
      const mount = findMount(await sys.readMountInfo(), source);
      if (!mount) return false;
      const health = await this.#o.health.check(source, mount.majorMinor);
      if (health.ok) return false;
      log.warn("Source {source} is dead ({problem}); unmounting (republish will remount)", {
        source,
        problem: health.problem,
      });
      await sys.unmount(source, { detach: true });
      return true;
    });
  }

  async #waitUnused(source: string): Promise<boolean> {
    const deadline = performance.now() + (this.#o.inUseWaitMs ?? 30_000);
    for (;;) {
      const mounts = await this.#o.sys.readMountInfo();
      const src = findMount(mounts, source);
      if (!src || mountsOfSource(mounts, src).length <= 1) return true;
      if (performance.now() >= deadline || this.#signal?.aborted) return false;
      await sleep(this.#o.pollMs ?? 250, this.#signal);
    }
  }
}
