/**
 * The mount work behind NodePublishVolume and NodeUnpublishVolume. {@link Publisher.publish} is
 * the plan; each numbered step is a method below.
 *
 * Two locks, always taken in this order: the **target's** (publish and unpublish of one target
 * never overlap; an unpublish also cancels a publish of the same target still in flight, so a late
 * publish can never bind-mount after the unpublish returned) and the **Mountpoint Pod's** (shared
 * with the unmounter, so one source mount is never made and unmade at once).
 *
 * Every wait is bounded by its own timeout and by the call's `signal` (the kubelet's deadline,
 * cancel, disconnect); nothing is bind-mounted once the signal has aborted.
 *
 * The Mountpoint Pod is untrusted: its comm dir is used only through a `DirHandle` (no link
 * followed, regular files only, nothing blocks), the mounter's socket is reached without
 * following links, and what it reports is cut short for the workload's Events.
 *
 * @module
 */
import {
  CsiError,
  deadlineExceeded,
  failedPrecondition,
  internal,
  unavailable,
} from "../csi/errors.ts";
import { Code } from "../csi/errors.ts";
import {
  encodeMountMessage,
  type MountMessage,
  type MountSession,
} from "../mppod/mount_message.ts";
import { negotiate, podProtocols, ProtocolSkewError } from "../mppod/mount_protocol.ts";
import { MOUNT_ERROR, MOUNT_SOCK, sourceMountDir, sourceMountRoot } from "../mppod/paths.ts";
import { CACHE_ATTRIBUTES, CACHE_VOLUME_NAME } from "../mppod/cache_volume.ts";
import { ANNOTATION_BROKEN, LABEL_DRIVER_VERSION } from "../mppod/labels.ts";
import type { BucketProbe } from "../s3/bucket_probe.ts";
import { isErrno } from "../sys/errno.ts";
import { type DirHandle, type Files, UnsafeEntryError } from "../sys/files.ts";
import { findMount, type MountInfo } from "../sys/mountinfo.ts";
import type { Sys } from "../sys/sys.ts";
import { sleep } from "../util/sleep.ts";
import { errorMessage } from "../util/errors.ts";
import { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import { openCommDir, readMountError, reportForLog, shortMessage } from "./comm_dir.ts";
import {
  engineCredentialsEnv,
  refuseCredentialKeys,
  removeCredentials,
  resolveCredentials,
  type S3Credentials,
  writeCredentials,
} from "./credentials.ts";
import type { Custody } from "./custody.ts";
import { handOver } from "./hand_over.ts";
import { type HealthChecker, needsRepair } from "./health.ts";
import type { PodIdentity } from "./pod_identity.ts";
import { renderArgs } from "./mount_options.ts";
import { type MountpointPod, type MountpointPods, podUser } from "./mountpoint_pods.ts";
import type { PublishParams } from "./publish_request.ts";
import { sourceOf } from "./volume_stats.ts";
import { checkMountpointPod } from "./pod_invariants.ts";
import { podFingerprint } from "./pod_fingerprint.ts";
import type { MountpointPodInvariants } from "../mppod/pod_spec.ts";

const log = logger("node", "publisher");

/** Timeouts of the publish steps, in milliseconds (the call's deadline may end them sooner). */
export interface PublishTimeouts {
  /** Waiting for the S3PA assignment (and for the API caches after a start). */
  readonly attachmentMs: number;
  /** Waiting for the Mountpoint Pod to be Running. */
  readonly podRunningMs: number;
  /** Connecting to the mounter's socket. */
  readonly connectMs: number;
  /** Waiting for the engine to answer on the new mount. */
  readonly readyMs: number;
  /** The bucket probe. */
  readonly probeMs: number;
}

/** Defaults for {@link PublishTimeouts}. */
export const DEFAULT_TIMEOUTS: PublishTimeouts = {
  attachmentMs: 90_000,
  podRunningMs: 90_000,
  connectMs: 30_000,
  readyMs: 30_000,
  probeMs: 10_000,
};

/**
 * How long a source whose session the node plugin holds may hang before it is given up: its
 * engine (or its whole Mountpoint container, under the kubelet's restart back-off) is being
 * restarted meanwhile and resumes the session.
 */
export const RECOVERY_TOLERANCE_MS = 60_000;
/** Remounts of one Mountpoint Pod's source tolerated within {@link REMOUNT_WINDOW_MS}. */
export const MAX_REMOUNTS = 3;
/** See {@link MAX_REMOUNTS}. */
export const REMOUNT_WINDOW_MS = 10 * 60_000;

/** Mode of the source mount root and of each source dir: only root reaches bucket data there. */
export const SOURCE_DIR_MODE = 0o700;

/** Everything the publisher needs. */
export interface PublisherOptions {
  readonly sys: Sys;
  readonly files: Files;
  readonly pods: MountpointPods;
  /** Per-Mountpoint-Pod locks, shared with the unmounter. */
  readonly locks: KeyedMutex;
  readonly health: HealthChecker;
  /** Where the FUSE fds of resumable sources are kept (shared with the unmounter). */
  readonly custody: Custody;
  /** Bucket check before a new source mount; skipped when undefined. */
  readonly probe?: BucketProbe | undefined;
  /** Kubelet root dir. */
  readonly kubeletRoot: string;
  /** The node plugin's environment (driver credentials). */
  readonly env: (name: string) => string | undefined;
  /** S3 endpoint for every volume (undefined: AWS). */
  readonly endpoint: string | undefined;
  /** Default region. */
  readonly region: string;
  /** Read-ahead of new source mounts in KiB (0: kernel default). */
  readonly readAheadKb: number;
  /** What a Mountpoint Pod must be before it gets credentials and a FUSE connection. */
  readonly mountpointPod: MountpointPodInvariants;
  /** Credentials of `authenticationSource: pod` volumes; such volumes are refused without. */
  readonly podIdentity?: PodIdentity | undefined;
  readonly timeouts?: Partial<PublishTimeouts>;
}

/** What a publish did. */
export type PublishOutcome = "already-published" | "bind" | "source-and-bind";

/** Reason given to a publish cancelled by an unpublish of its target. */
export class SupersededError extends Error {
  override name = "SupersededError";
}

const NEVER = new AbortController().signal;

/**
 * Proxy variables of the node plugin handed to the engine (the Mountpoint Pod has none of its
 * own): both spellings, as the engines read either (lower case first).
 */
export const PROXY_ENV = [
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
] as const;

/** The publish/unpublish work of one node. */
export class Publisher {
  readonly #o: PublisherOptions;
  readonly #t: PublishTimeouts;
  readonly #targets = new KeyedMutex();
  /** Publishes in flight by target, so an unpublish can cancel them. */
  readonly #publishing = new Map<string, Set<AbortController>>();
  /** When each Mountpoint Pod's source was last given up and mounted again. */
  readonly #remounts = new Map<string, number[]>();

  /** Create a publisher. */
  constructor(options: PublisherOptions) {
    this.#o = options;
    this.#t = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  }

  /**
   * Publish a validated request:
   *
   * 1. Resolve the credentials (nothing is touched when they are wrong).
   * 2. Take the target's lock; a target already mounted and answering is done (no API needed).
   * 3. Find the workload's Mountpoint Pod: the API caches, its S3PA assignment, the pod Running.
   * 4. Take the pod's lock and look again: the target may be a stale mount of an older source.
   * 5. Make sure the pod's FUSE source mount exists and answers ({@link #mountSource} when not).
   * 6. Bind-mount the source on the target (read-only binds keep `nosuid,nodev`), unless the
   *    call was cancelled meanwhile.
   *
   * @throws {CsiError}
   */
  async publish(
    p: PublishParams,
    secrets: Readonly<Record<string, string>> | null | undefined,
    signal: AbortSignal = NEVER,
  ): Promise<PublishOutcome> {
    // 1. (pod identity: from STS once the attachment names the role, see #podCredentials)
    let creds: S3Credentials | undefined;
    if (p.authenticationSource === "pod") refuseCredentialKeys(secrets);
    else {
      creds = resolveCredentials(
        p.authenticationSource,
        secrets,
        this.#o.env,
        p.options.has("no-sign-request"),
      );
    }
    // 2.
    const mine = new AbortController();
    const onCallAbort = () => mine.abort(signal.reason);
    if (signal.aborted) onCallAbort();
    signal.addEventListener("abort", onCallAbort, { once: true });
    const inFlight = this.#publishing.get(p.targetPath) ?? new Set();
    inFlight.add(mine);
    this.#publishing.set(p.targetPath, inFlight);
    try {
      return await this.#targets.run(
        p.targetPath,
        () => this.#publishLocked(p, creds, mine.signal),
        mine.signal,
      );
    } catch (err) {
      if (mine.signal.reason instanceof SupersededError) {
        throw new CsiError(Code.ABORTED, mine.signal.reason.message, { cause: err });
      }
      throw err;
    } finally {
      signal.removeEventListener("abort", onCallAbort);
      inFlight.delete(mine);
      if (inFlight.size === 0 && this.#publishing.get(p.targetPath) === inFlight) {
        this.#publishing.delete(p.targetPath);
      }
    }
  }

  async #publishLocked(
    p: PublishParams,
    creds: S3Credentials | undefined,
    signal: AbortSignal,
  ): Promise<PublishOutcome> {
    const { sys, pods } = this.#o;
    const before = await sys.readMountInfo();
    const existing = findMount(before, p.targetPath);
    if (existing && !(await this.#needsRepair(p.targetPath, existing, before, signal))) {
      await this.#renewFromCache(p, signal);
      return "already-published";
    }
    // 3.
    const deadline = performance.now() + Math.max(this.#t.attachmentMs, this.#t.podRunningMs);
    const remaining = (ms: number) => Math.max(1, Math.min(ms, deadline - performance.now()));
    await this.#waitForApi(remaining(this.#t.attachmentMs), signal);
    const query = { podUID: p.podUID, volumeName: p.volumeName, volumeId: p.volumeId };
    const mpName = await pods.waitForAssignment(query, remaining(this.#t.attachmentMs), signal);
    const pod = await pods.waitForRunning(mpName, remaining(this.#t.podRunningMs), signal);
    const broken = pod.metadata?.annotations?.[ANNOTATION_BROKEN];
    if (broken) {
      throw failedPrecondition(
        `Mountpoint Pod ${pods.namespace}/${mpName} is marked broken (${broken}); the controller replaces it, and the next NodePublishVolume uses the new one`,
      );
    }
    // 4.
    return await this.#o.locks.run(mpName, async () => {
      const source = sourceMountDir(this.#o.kubeletRoot, mpName);
      const mounts = await sys.readMountInfo();
      let srcMount = findMount(mounts, source);
      const target = findMount(mounts, p.targetPath);
      if (target) {
        if (
          srcMount && target.majorMinor === srcMount.majorMinor &&
          !(await this.#needsRepair(p.targetPath, target, mounts, signal))
        ) {
          await this.#renewPodCredentials(p, mpName, pod, signal);
          return "already-published";
        }
        log.warn("Target {target} is mounted but broken or stale; remounting", {
          target: p.targetPath,
        });
        await sys.unmount(p.targetPath, { detach: true });
      }
      // 5.
      if (srcMount && (await this.#needsRepair(source, srcMount, mounts, signal))) {
        await this.#giveUpSource(mpName, srcMount, signal);
        srcMount = undefined;
      }
      let outcome: PublishOutcome = "bind";
      if (!srcMount) {
        const c = creds ?? await this.#podCredentials(p, mpName);
        await this.#mountSource(p, c, mpName, pod, source, signal);
        if (c.expiresAt !== undefined) this.#o.podIdentity?.written(mpName, c.expiresAt);
        outcome = "source-and-bind";
      } else await this.#renewPodCredentials(p, mpName, pod, signal);
      // 6.
      signal.throwIfAborted();
      await this.#o.files.mkdir(p.targetPath, { recursive: true, mode: 0o750 });
      try {
        await sys.bindMount(source, p.targetPath, { readOnly: p.readOnlyTarget });
      } catch (err) {
        throw internal(
          `Could not bind-mount the volume on "${p.targetPath}": ${errorMessage(err)}`,
          { cause: err },
        );
      }
      return outcome;
    }, signal);
  }

  /**
   * Unmount and remove a target; idempotent. A publish of the same target still in flight is
   * cancelled first (it answers ABORTED), then this waits for the target's lock.
   * @throws {CsiError} Internal when it stays mounted
   */
  async unpublish(
    targetPath: string,
    signal: AbortSignal = NEVER,
  ): Promise<"unmounted" | "not-mounted"> {
    for (const publishing of this.#publishing.get(targetPath) ?? []) {
      publishing.abort(
        new SupersededError(
          `NodeUnpublishVolume of "${targetPath}" arrived while this publish was in flight; the publish was cancelled`,
        ),
      );
    }
    return await this.#targets.run(targetPath, () => this.#unmountTarget(targetPath), signal);
  }

  async #unmountTarget(targetPath: string): Promise<"unmounted" | "not-mounted"> {
    const { sys, files } = this.#o;
    let result: "unmounted" | "not-mounted" = "not-mounted";
    for (let i = 0; i < 8 && findMount(await sys.readMountInfo(), targetPath); i++) {
      try {
        await sys.unmount(targetPath);
      } catch (err) {
        if (!isErrno(err, "EBUSY")) {
          throw internal(`Could not unmount "${targetPath}": ${errorMessage(err)}`, { cause: err });
        }
        log.warn("Target {target} is busy; detaching it", { target: targetPath });
        await sys.unmount(targetPath, { detach: true });
      }
      result = "unmounted";
    }
    if (findMount(await sys.readMountInfo(), targetPath)) {
      throw internal(`"${targetPath}" is still mounted after unmounting; retry later`);
    }
    try {
      await files.remove(targetPath);
    } catch (err) {
      log.warn("Could not remove target dir {target}: {error}", {
        target: targetPath,
        error: errorMessage(err),
      });
    }
    return result;
  }

  /**
   * Whether `mount` (a source, or a target bound from one) must be repaired. Checked once per
   * Mountpoint Pod at a time (the key is its source); a hang is tolerated for
   * {@link RECOVERY_TOLERANCE_MS} while the node plugin holds the session (its engine is being
   * restarted), not otherwise; "not checked" never leads to a repair.
   */
  async #needsRepair(
    path: string,
    mount: MountInfo,
    mounts: readonly MountInfo[],
    signal: AbortSignal,
  ): Promise<boolean> {
    const source = sourceOf(mounts, mount, this.#o.kubeletRoot);
    const health = await this.#o.health.check(
      path,
      source?.mount.mountPoint ?? mount.majorMinor,
      signal,
    );
    const held = source !== undefined && this.#o.custody.has(source.mpName);
    const repair = needsRepair(health, held ? RECOVERY_TOLERANCE_MS : 0);
    if (!health.ok && !repair) {
      log.info("{path} does not answer yet ({problem}); its session is being resumed", {
        path,
        problem: health.problem,
      });
    }
    return repair;
  }

  /**
   * Step 5, before mounting again: give the old source up. A connection that hangs is aborted
   * (fusectl), so its callers and its health probe get an error at once instead of waiting
   * forever; then it is released and unmounted. At most {@link MAX_REMOUNTS} per Mountpoint Pod
   * within {@link REMOUNT_WINDOW_MS}: past that the pod is marked broken (the controller tells its
   * workloads and replaces it) and the publish fails saying so.
   */
  async #giveUpSource(mpName: string, src: MountInfo, signal: AbortSignal): Promise<void> {
    const { sys } = this.#o;
    log.warn("Source mount {source} does not answer; mounting it again", {
      source: src.mountPoint,
    });
    await sys.abortFuseConnection(src.minor).catch((err) =>
      log.warn("Could not abort the FUSE connection of {source}: {error}", {
        source: src.mountPoint,
        error: errorMessage(err),
      })
    );
    this.#o.custody.release(mpName);
    await sys.unmount(src.mountPoint, { detach: true });
    const now = performance.now();
    const recent = (this.#remounts.get(mpName) ?? []).filter((t) => now - t < REMOUNT_WINDOW_MS);
    recent.push(now);
    this.#remounts.set(mpName, recent);
    if (recent.length > MAX_REMOUNTS) {
      const reason = `its FUSE mount stopped answering ${recent.length} times within ${
        REMOUNT_WINDOW_MS / 60_000
      } minutes`;
      await this.#o.pods.markBroken(mpName, `The node plugin gave this pod up: ${reason}`, signal)
        .catch((err) =>
          log.warn("Could not mark Mountpoint Pod {pod} broken: {error}", {
            pod: mpName,
            error: errorMessage(err),
          })
        );
      this.#remounts.delete(mpName);
      throw failedPrecondition(
        `Mountpoint Pod ${mpName} was given up: ${reason}; it is marked broken and the controller replaces it. See kubectl logs -n ${this.#o.pods.namespace} ${mpName}`,
      );
    }
  }

  /**
   * Step 3 begins here: the API caches must have been filled once (after a start without API
   * they are not).
   */
  async #waitForApi(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (this.#o.pods.synced) return;
    try {
      await this.#o.pods.waitForSync(timeoutMs, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw unavailable(
        `The node plugin has not been able to read Mountpoint Pods and their attachments from the Kubernetes API since it started (${
          errorMessage(err)
        }); already mounted volumes keep working, new ones wait for the API. Check the API server and the node plugin's log`,
        { cause: err },
      );
    }
  }

  /**
   * Step 5, a new FUSE source mount for Mountpoint Pod `mpName`:
   *
   * a. Open the pod's comm dir (no link followed) and start the bucket check.
   * b. Write the credential files into it; remove a stale `mount.error`.
   * c. Create the source dir (0700: host users cannot browse bucket data).
   * d. Once the bucket check passed: open `/dev/fuse`, mount the source, hand the fd and the
   *    options to the mounter over its socket, close our fd.
   * e. Wait until the engine answers on the mount, or the mounter reports an error.
   * f. Raise the mount's read-ahead.
   *
   * Any failure unmounts what was mounted and removes the credentials again.
   */
  async #mountSource(
    p: PublishParams,
    creds: S3Credentials,
    mpName: string,
    pod: MountpointPod,
    source: string,
    signal: AbortSignal,
  ): Promise<void> {
    const { sys, files } = this.#o;
    const ns = pod.metadata?.namespace ?? "";
    const who = `${ns}/${mpName}`;
    const uid = pod.metadata?.uid;
    if (!uid) throw internal(`Mountpoint Pod ${who} has no UID`);
    if (p.cache && !pod.spec?.volumes?.some((v) => v.name === CACHE_VOLUME_NAME)) {
      throw failedPrecondition(
        `The volume asks for a local cache (${CACHE_ATTRIBUTES.cache}: ${p.cache.type}) but Mountpoint Pod ${who} has no "${CACHE_VOLUME_NAME}" volume: the controller that made it does not know local caches; run the controller of the node plugin's version`,
      );
    }
    // a.
    let comm: DirHandle | undefined;
    try {
      comm = await openCommDir(files, this.#o.kubeletRoot, uid);
    } catch (err) {
      if (err instanceof UnsafeEntryError) {
        throw failedPrecondition(`Mountpoint Pod ${who}: ${err.message}`);
      }
      throw err;
    }
    if (!comm) {
      throw failedPrecondition(
        `The comm directory of Mountpoint Pod ${who} is missing: the pod must have the "comm" emptyDir, and --kubelet-path must be the kubelet root`,
      );
    }
    using _comm = comm;
    const t0 = performance.now();
    const probing = this.#o.probe ? this.#probe(p, creds) : Promise.resolve();
    probing.catch(() => {});
    let mounted = false;
    try {
      // b. A pod this node plugin cannot talk to gets no keys (skew policy: mount_protocol.ts).
      let session: { version: number; session?: MountSession };
      try {
        session = this.#session(pod, p, who);
        checkMountpointPod(pod, this.#o.mountpointPod, who); // adoption by name: issue 23
      } catch (err) {
        throw await this.#unusable(pod, mpName, err, signal);
      }
      try {
        await writeCredentials(comm, creds, podUser(pod));
        await comm.remove(MOUNT_ERROR);
      } catch (err) {
        if (err instanceof UnsafeEntryError) {
          throw failedPrecondition(
            `Mountpoint Pod ${who} tampered with its comm dir: ${err.message}`,
          );
        }
        throw err;
      }
      const message = this.#message(p, creds, session);
      // c.
      await files.mkdir(sourceMountRoot(this.#o.kubeletRoot), {
        recursive: true,
        mode: SOURCE_DIR_MODE,
      });
      await files.chmod(sourceMountRoot(this.#o.kubeletRoot), SOURCE_DIR_MODE);
      await files.mkdir(source, { mode: SOURCE_DIR_MODE });
      await files.chmod(source, SOURCE_DIR_MODE);
      // d.
      await probing;
      signal.throwIfAborted();
      const probed = performance.now();
      const fd = sys.openFuse();
      let kept = false;
      try {
        await sys.mountFuse(source, { fd, readOnly: p.readOnlyVolume, allowOther: true });
        mounted = true;
        await this.#handOver(comm, who, encodeMountMessage(message), fd, signal);
        const m = message.session && findMount(await sys.readMountInfo(), source);
        if (m) {
          // The connection must not depend on the Mountpoint container alone.
          await this.#o.custody.hold(mpName, {
            fd,
            podUid: uid,
            source,
            majorMinor: m.majorMinor,
            message,
            pod: podFingerprint(pod),
          });
          kept = true;
        }
      } finally {
        if (!kept) sys.closeFd(fd);
      }
      const sent = performance.now();
      // e.
      await this.#waitReady(source, comm, who, p.bucket, creds, signal);
      const ready = performance.now();
      // f.
      const m = findMount(await sys.readMountInfo(), source);
      if (m && this.#o.readAheadKb > 0) {
        await sys.setReadAheadKb(m.majorMinor, this.#o.readAheadKb).catch((err) =>
          log.warn("Could not set read-ahead of {source}: {error}", {
            source,
            error: errorMessage(err),
          })
        );
      }
      log.info(
        "Mounted bucket {bucket} at {source} through Mountpoint Pod {pod} (check+prepare {probeMs} ms, mount+send {sendMs} ms, engine ready {readyMs} ms)",
        {
          bucket: p.bucket,
          source,
          pod: who,
          credentialSource: creds.source,
          accessKeyId: creds.accessKeyId,
          probeMs: Math.round(probed - t0),
          sendMs: Math.round(sent - probed),
          readyMs: Math.round(ready - sent),
        },
      );
    } catch (err) {
      if (mounted) {
        this.#o.custody.release(mpName);
        await sys.unmount(source, { detach: true }).catch(() => {});
      }
      // Nothing is mounted from this pod: its credentials go too.
      await removeCredentials(comm).catch((e) =>
        log.warn("Could not remove the credentials of {pod}: {error}", {
          pod: who,
          error: errorMessage(e),
        })
      );
      throw err;
    }
  }

  /**
   * Pod identity: temporary credentials for the role the workload's attachment names, in exchange
   * for the token kubelet sent. @throws {CsiError}
   */
  async #podCredentials(p: PublishParams, mpName: string): Promise<S3Credentials> {
    const identity = this.#o.podIdentity;
    if (!identity || !p.podIdentity) {
      throw failedPrecondition(
        `authenticationSource "pod" is not enabled on this node plugin (it needs an STS client: see --pod-identity-audience)`,
      );
    }
    const attachment = this.#o.pods.findAttachment({
      podUID: p.podUID,
      volumeName: p.volumeName,
      volumeId: p.volumeId,
    });
    return await identity.credentials({
      tokens: p.podIdentity.serviceAccountTokens,
      podUID: p.podUID,
      serviceAccount: p.podIdentity.serviceAccount,
      roleArn: attachment?.mountpointPod === mpName
        ? attachment.spec.workloadServiceAccountIAMRoleARN
        : undefined,
      s3Endpoint: p.endpoint ?? this.#o.endpoint,
      region: String(p.options.get("region") ?? this.#o.region),
    });
  }

  /**
   * A republish of a mounted pod-identity volume: renew the Mountpoint Pod's credentials with the
   * fresh token when they are due ({@link PodIdentity.due}); the mount is not touched (the engine
   * reads the new credentials file). Runs under the Mountpoint Pod's lock. @throws {CsiError}
   */
  async #renewPodCredentials(
    p: PublishParams,
    mpName: string,
    pod: MountpointPod,
    signal: AbortSignal,
  ): Promise<void> {
    const identity = this.#o.podIdentity;
    if (p.authenticationSource !== "pod" || !identity?.due(mpName)) return;
    const creds = await this.#podCredentials(p, mpName);
    signal.throwIfAborted();
    const uid = pod.metadata?.uid;
    try {
      const comm = uid ? await openCommDir(this.#o.files, this.#o.kubeletRoot, uid) : undefined;
      if (!comm) return; // gone: the next mount writes credentials anyway
      using _comm = comm;
      await writeCredentials(comm, creds, podUser(pod));
    } catch (err) {
      if (err instanceof UnsafeEntryError) {
        throw failedPrecondition(
          `Mountpoint Pod ${mpName} tampered with its comm dir: ${err.message}`,
        );
      }
      throw err;
    }
    identity.written(mpName, creds.expiresAt!);
    log.info("Renewed the credentials of Mountpoint Pod {pod} (role of {account}) until {until}", {
      pod: mpName,
      account: p.podIdentity?.serviceAccount,
      accessKeyId: creds.accessKeyId,
      until: new Date(creds.expiresAt!).toISOString(),
    });
  }

  /**
   * {@link #renewPodCredentials} for a target found mounted before the API was asked: the
   * Mountpoint Pod from the caches (nothing when they are not filled), under its lock.
   */
  async #renewFromCache(p: PublishParams, signal: AbortSignal): Promise<void> {
    const { pods, podIdentity } = this.#o;
    if (p.authenticationSource !== "pod" || !pods.synced) return;
    const mpName = pods.findAssignment({
      podUID: p.podUID,
      volumeName: p.volumeName,
      volumeId: p.volumeId,
    });
    const pod = mpName ? pods.pod(mpName) : undefined;
    if (!mpName || !pod || !podIdentity?.due(mpName)) return;
    await this.#o.locks.run(
      mpName,
      () => this.#renewPodCredentials(p, mpName, pod, signal),
      signal,
    );
  }

  /** Step 5d: connect to the mounter (without following links) and send options + fd. */
  async #handOver(
    comm: DirHandle,
    who: string,
    bytes: Uint8Array,
    fd: number,
    signal: AbortSignal,
  ): Promise<void> {
    try {
      await handOver(this.#o.sys, comm, bytes, fd, { connectMs: this.#t.connectMs, signal });
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof UnsafeEntryError) {
        throw failedPrecondition(
          `Mountpoint Pod ${who} tampered with its comm dir: ${err.message}`,
        );
      }
      throw new CsiError(
        Code.UNAVAILABLE,
        `Could not hand the mount to Mountpoint Pod ${who} (its ${MOUNT_SOCK}): ${
          errorMessage(err)
        }. The pod may have exited: see kubectl logs -n ${who.replace("/", " ")}`,
        { cause: err },
      );
    }
  }

  async #probe(p: PublishParams, creds: S3Credentials): Promise<void> {
    const region = String(p.options.get("region") ?? this.#o.region);
    const result = await this.#o.probe!.probe({
      bucket: p.bucket,
      endpoint: p.endpoint ?? this.#o.endpoint, // the volume's own (its Secret's), else the driver's
      region,
      forcePathStyle: true,
      accessKeyId: creds.accessKeyId,
      secretAccessKey: creds.secretAccessKey,
      sessionToken: creds.sessionToken,
      anonymous: creds.anonymous === true,
      requesterPays: p.options.has("requester-pays"),
      expectedBucketOwner: stringOption(p.options.get("expected-bucket-owner")),
    }, this.#t.probeMs);
    if (result.ok) return;
    const endpoint = p.endpoint ?? this.#o.endpoint ?? "AWS S3";
    switch (result.reason) {
      case "no-such-bucket":
        throw failedPrecondition(
          `Bucket "${p.bucket}" does not exist on ${endpoint}: create it or fix volumeAttributes.bucketName`,
        );
      case "access-denied":
        log.warn("Access to bucket {bucket} denied for access key {accessKeyId}", {
          bucket: p.bucket,
          accessKeyId: creds.accessKeyId,
          source: creds.source,
        });
        throw new CsiError(
          Code.PERMISSION_DENIED,
          `Access to bucket "${p.bucket}" was denied for the ${creds.source} credentials: check the keys and the bucket policy (the access key id is in the node plugin's log)`,
        );
      case "unreachable":
        throw new CsiError(
          Code.UNAVAILABLE,
          `S3 endpoint ${endpoint} is unreachable while checking bucket "${p.bucket}": ${
            shortMessage(result.message, [creds.accessKeyId])
          }`,
        );
      default:
        throw failedPrecondition(
          `Checking bucket "${p.bucket}" failed: ${
            shortMessage(result.message, [creds.accessKeyId])
          }`,
        );
    }
  }

  /**
   * `err`: why Mountpoint Pod `mpName` cannot get a new source mount from this node plugin (no
   * common protocol, or not the pod this node plugin expects). When another driver version made
   * it — a rollout under way: the old controller assigned it before this node plugin replaced the
   * old one — nothing is mounted from it on this node (this runs only for a pod without a source
   * mount): ask the controller to replace it (the broken annotation), so that the workload's next
   * publish gets a pod of this version instead of failing until someone deletes it. A pod of this
   * version that differs (another's pod under its name, or settings that disagree) is only refused.
   */
  async #unusable(
    pod: MountpointPod,
    mpName: string,
    err: unknown,
    signal: AbortSignal,
  ): Promise<unknown> {
    const made = pod.metadata?.labels?.[LABEL_DRIVER_VERSION];
    if (!(err instanceof CsiError) || !made || made === DRIVER_VERSION) return err;
    const why =
      `made for driver ${made}, which this node plugin (driver ${DRIVER_VERSION}) cannot use, and nothing is mounted from it on this node`;
    try {
      await this.#o.pods.markBroken(
        mpName,
        `The node plugin asked for a replacement: the pod was ${why}`,
        signal,
      );
    } catch (e) {
      log.warn("Could not mark Mountpoint Pod {pod} for replacement: {error}", {
        pod: mpName,
        error: errorMessage(e),
      });
      return err;
    }
    return failedPrecondition(
      `${err.message}. It was ${why}: the controller replaces it, and the next NodePublishVolume uses the new one`,
    );
  }

  /**
   * The mount protocol with `pod` and the session of a new source mount: a session with protocol 2
   * and mount-s3 (the engine that can resume one), with a new id; none with protocol 1 (a pod whose
   * image predates sessions) or rclone.
   * @throws {CsiError} FailedPrecondition naming both sides' driver versions and protocol ranges
   * when the pod and this node plugin share no protocol
   */
  #session(
    pod: MountpointPod,
    p: PublishParams,
    who: string,
  ): { version: number; session?: MountSession } {
    let version: number;
    try {
      version = negotiate(podProtocols(pod.metadata?.annotations));
    } catch (err) {
      if (err instanceof ProtocolSkewError) {
        const made = pod.metadata?.labels?.[LABEL_DRIVER_VERSION] ?? "unknown";
        throw failedPrecondition(
          `Mountpoint Pod ${who} (driver ${made}) cannot be used by this node plugin (driver ${DRIVER_VERSION}): ${err.message}`,
        );
      }
      throw err;
    }
    if (version < 2 || p.engine !== "mount-s3") return { version };
    const id = Array.from(crypto.getRandomValues(new Uint8Array(16)))
      .map((b) => b.toString(16).padStart(2, "0")).join("");
    return { version, session: { id, resume: false } };
  }

  #message(
    p: PublishParams,
    creds: S3Credentials,
    { version, session }: { version: number; session?: MountSession },
  ): MountMessage {
    const options = new Map(p.options);
    const attempts = options.get("aws-max-attempts");
    options.delete("aws-max-attempts");
    // The volume's own prefix first, then the driver's (as upstream puts its prefix before its own).
    const driverAgent = `s3-csi-driver/${DRIVER_VERSION} credential-source#${
      creds.anonymous ? "none" : creds.source
    }`;
    const userAgent = options.get("user-agent-prefix");
    options.set("user-agent-prefix", userAgent ? `${userAgent} ${driverAgent}` : driverAgent);
    const region = String(options.get("region") ?? this.#o.region);
    const proxy = PROXY_ENV.flatMap((k) => {
      const v = this.#o.env(k);
      return v ? [`${k}=${v}`] : [];
    });
    const endpoint = p.endpoint ?? this.#o.endpoint; // the volume's own (its Secret's), else the driver's
    const env = [
      ...engineCredentialsEnv(creds),
      `AWS_REGION=${region}`,
      ...(endpoint ? [`AWS_ENDPOINT_URL=${endpoint}`] : []),
      ...(attempts !== undefined ? [`AWS_MAX_ATTEMPTS=${attempts}`] : []),
      ...proxy,
    ].sort();
    return {
      // The agreed version, on the wire from 2 on (1 is the upstream message, which names none):
      // a mounter whose oldest protocol is 2 refuses a message without it, engine or not.
      ...(version >= 2 ? { protocolVersion: version } : {}),
      bucketName: p.bucket,
      args: renderArgs(options),
      env,
      volumeId: p.volumeId,
      engine: p.engine,
      ...(session ? { session } : {}),
    };
  }

  /**
   * Step 5e: wait for the engine to answer on `source`, or for the mounter to report an error
   * (`mount.error`), bounded by the ready timeout and the call's signal. The mounter's report is
   * logged in full (bounded) and cut short for the CSI error.
   */
  async #waitReady(
    source: string,
    comm: DirHandle,
    pod: string,
    bucket: string,
    creds: S3Credentials,
    signal: AbortSignal,
  ): Promise<void> {
    const { sys } = this.#o;
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    const fail = (report: string) => {
      log.warn("Mountpoint Pod {pod} could not mount bucket {bucket}: {report}", {
        pod,
        bucket,
        report: reportForLog(report),
      });
      return failedPrecondition(
        `Mountpoint Pod ${pod} could not mount bucket "${bucket}": ${
          shortMessage(report, [creds.accessKeyId])
        } (full report: kubectl logs -n ${pod.replace("/", " ")})`,
      );
    };
    const watchError = (async () => {
      while (!stop.signal.aborted) {
        const text = await readMountError(comm);
        if (text) return text;
        await sleep(25, stop.signal).catch(() => {});
      }
      return undefined;
    })();
    const ready = sys.waitMountReady(source, { timeoutMs: this.#t.readyMs, signal: stop.signal })
      .then(() => undefined);
    try {
      const report = await Promise.race([ready, watchError]);
      if (report !== undefined) {
        stop.abort(new Error(report));
        await ready.catch(() => {});
        throw fail(report);
      }
    } catch (err) {
      if (err instanceof CsiError) throw err;
      if (signal.aborted) throw err;
      // A mounter that refuses the message closes the fd, so the stat may fail (ENOTCONN) just
      // before its mount.error lands: give it a moment, it is the better explanation.
      let report = await readMountError(comm);
      if (!report) {
        await sleep(100);
        report = await readMountError(comm);
      }
      if (report) throw fail(report);
      throw deadlineExceeded(
        `The FUSE engine of Mountpoint Pod ${pod} did not answer for bucket "${bucket}": ${
          errorMessage(err)
        }. See kubectl logs -n ${pod.replace("/", " ")}`,
        { cause: err },
      );
    } finally {
      signal.removeEventListener("abort", onAbort);
      stop.abort();
      await watchError.catch(() => {});
    }
  }
}

/** A value option's value (undefined for an absent option or a flag). */
function stringOption(value: string | true | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}
