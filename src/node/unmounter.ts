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
 * - At startup, copies of the source mounts elsewhere in the plugin's own mount namespace (the
 *   container runtime copies the sources that exist when it bind-mounts the plugin dir at the
 *   socket dir) are detached: they would count as a reference forever and keep the FUSE
 *   connections alive after their sources are unmounted.
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
import type { Custody } from "./custody.ts";
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
  /** The FUSE fds of resumable sources: released when their source is unmounted. */
  readonly custody: Custody;
  readonly kubeletRoot: string;
  /** How long to wait for bind mounts of a source to go. @default 30000 */
  readonly inUseWaitMs?: number;
  /** Pause between checks while waiting. @default 250 */
  readonly pollMs?: number;
}

/**
 * True when `path` is a copy of `source` (`<kubelet>/plugins/<driver>/mnt/<pod>`) the container
 * runtime made where the plugin dir is mounted again (`/csi/mnt/<pod>`): same last two path
 * components, outside the kubelet root. Such a copy is never a workload's reference.
 */
export function isSourceCopy(path: string, source: string, kubeletRoot: string): boolean {
  const tail = source.split("/").slice(-2).join("/");
  return path !== source && !path.startsWith(`${kubeletRoot.replace(/\/+$/, "")}/`) &&
    path.endsWith(`/${tail}`);
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

  /**
   * Clean exit of one pod marked `needs-unmount`. `waitInUse: false` answers `in-use` at once
   * instead of waiting (bounded) for the source's bind mounts to go.
   */
  unmountPod(pod: MountpointPod, opts: { waitInUse?: boolean } = {}): Promise<UnmountOutcome> {
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
        if (!(await this.#waitUnused(source, opts.waitInUse === false ? 0 : undefined))) {
          log.info("Source {source} of {pod} is still in use; will retry", { source, pod: name });
          return "in-use";
        }
        this.#o.custody.release(name);
        await sys.unmount(source).catch(async (err) => {
          log.warn("Unmount of {source} failed ({error}); detaching", {
            source,
            error: errorMessage(err),
          });
          await sys.unmount(source, { detach: true });
        });
        await this.#detachCopies(source, src.majorMinor);
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
      const src = findMount(await sys.readMountInfo(), source);
      const mounted = src !== undefined;
      this.#o.custody.release(name);
      if (src) {
        await sys.unmount(source, { detach: true });
        await this.#detachCopies(source, src.majorMinor);
      }
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
    await this.#dropCopies();
    const cleaned: string[] = [];
    for (const name of await files.readDir(sourceMountRoot(kubeletRoot))) {
      const pod = pods.pod(name);
      if (!pod) {
        if (await this.cleanOrphan(name)) cleaned.push(name);
        continue;
      }
      if (isAnnotatedTrue(pod.metadata?.annotations, ANNOTATION_NEEDS_UNMOUNT)) {
        // Never wait here: a workload's target that still holds the source goes only when the
        // kubelet unpublishes it, through the socket this process serves after the clean-up (the
        // kubelet and the plugin restarted together). The wait happens in the background.
        const outcome = await this.unmountPod(pod, { waitInUse: false });
        if (outcome === "unmounted") cleaned.push(name);
        else if (outcome === "in-use") this.#spawn(pod);
        continue;
      }
      if (await this.#cleanDead(name)) cleaned.push(name);
    }
    return cleaned;
  }

  /**
   * Detach the copies of source mounts that live outside the kubelet root at `…/mnt/<pod>` (where
   * the plugin dir is mounted again, e.g. the socket dir `/csi`): the runtime made them when it
   * started this container, they are this namespace's own, and they are never a workload's
   * target. Returns their paths.
   */
  async #dropCopies(): Promise<string[]> {
    const { sys, kubeletRoot } = this.#o;
    const root = sourceMountRoot(kubeletRoot);
    const mounts = await sys.readMountInfo();
    const dropped: string[] = [];
    for (const src of mounts) {
      if (!src.mountPoint.startsWith(`${root}/`)) continue;
      const name = src.mountPoint.slice(root.length + 1);
      if (!name || name.includes("/")) continue;
      for (const copy of mountsOfSource(mounts, src)) {
        const path = copy.mountPoint;
        if (!isSourceCopy(path, src.mountPoint, kubeletRoot)) continue;
        try {
          await sys.unmount(path, { detach: true });
          dropped.push(path);
        } catch (err) {
          log.warn("Could not detach {path}, a copy of source {source}: {error}", {
            path,
            source: src.mountPoint,
            error: errorMessage(err),
          });
        }
      }
    }
    if (dropped.length) {
      log.info("Detached {count} copies of source mounts in this mount namespace: {paths}", {
        count: dropped.length,
        paths: dropped,
      });
    }
    return dropped;
  }

  /** Detach what is left of `source`'s copies in this namespace once it is unmounted. */
  async #detachCopies(source: string, majorMinor: string): Promise<void> {
    const { sys, kubeletRoot } = this.#o;
    for (const m of await sys.readMountInfo()) {
      if (m.majorMinor !== majorMinor || !isSourceCopy(m.mountPoint, source, kubeletRoot)) continue;
      await sys.unmount(m.mountPoint, { detach: true }).catch((err) =>
        log.warn("Could not detach {path}, a copy of source {source}: {error}", {
          path: m.mountPoint,
          source,
          error: errorMessage(err),
        })
      );
    }
  }

  async #cleanDead(name: string): Promise<boolean> {
    const { sys, locks, kubeletRoot } = this.#o;
    return await locks.run(name, async () => {
      const source = sourceMountDir(kubeletRoot, name);
      const mount = findMount(await sys.readMountInfo(), source);
      if (!mount) return false;
      const health = await this.#o.health.check(source, source);
      // Only a mount that answers with an error is dead; one that hangs may be an engine being
      // restarted (the supervisor keeps the session): the publisher decides later.
      if (health.state !== "dead") return false;
      log.warn("Source {source} is dead ({problem}); unmounting (republish will remount)", {
        source,
        problem: health.problem,
      });
      this.#o.custody.release(name);
      await sys.unmount(source, { detach: true });
      return true;
    });
  }

  async #waitUnused(source: string, waitMs = this.#o.inUseWaitMs ?? 30_000): Promise<boolean> {
    const deadline = performance.now() + waitMs;
    for (;;) {
      const mounts = await this.#o.sys.readMountInfo();
      const src = findMount(mounts, source);
      if (!src) return true;
      const refs = mountsOfSource(mounts, src).filter((m) =>
        m.mountPoint !== source && !isSourceCopy(m.mountPoint, source, this.#o.kubeletRoot)
      );
      if (!refs.length) return true;
      if (performance.now() >= deadline || this.#signal?.aborted) return false;
      await sleep(this.#o.pollMs ?? 250, this.#signal);
    }
  }
}
