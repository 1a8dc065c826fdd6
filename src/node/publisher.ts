/**
 * The mount work behind NodePublishVolume and NodeUnpublishVolume.
 *
 * Publish: find the workload's Mountpoint Pod (watch-based waits), then under that pod's lock make
 * sure its FUSE **source mount** exists and is alive (open `/dev/fuse`, mount, write credentials,
 * send options + fd over `comm/mount.sock`, close our fd, wait for readiness, raise read-ahead),
 * and bind-mount it on the target (read-only binds keep `nosuid,nodev`). A dead source or target
 * (engine gone: `ENOTCONN`) is unmounted and made again, so a republish repairs a broken volume.
 *
 * Unpublish: unmount the target and remove the directory; idempotent. The source mount stays
 * until the controller marks its Mountpoint Pod `needs-unmount` (see `unmounter.ts`).
 *
 * @module
 */
import { CsiError, failedPrecondition, internal } from "../csi/errors.ts";
import { Code } from "../csi/errors.ts";
import { encodeMountMessage, type MountMessage } from "../mppod/mount_message.ts";
import {
  CREDENTIALS_DIR,
  hostCommDir,
  MOUNT_ERROR,
  MOUNT_SOCK,
  sourceMountDir,
} from "../mppod/paths.ts";
import type { BucketProbe } from "../s3/bucket_probe.ts";
import { isErrno } from "../sys/errno.ts";
import type { Files } from "../sys/files.ts";
import { findMount } from "../sys/mountinfo.ts";
import type { Sys } from "../sys/sys.ts";
import { errorMessage } from "../util/errors.ts";
import type { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { DRIVER_VERSION } from "../util/version.ts";
import {
  CONFIG_FILE,
  configFileText,
  CREDENTIALS_FILE,
  credentialsEnv,
  credentialsFileText,
  resolveCredentials,
  type S3Credentials,
} from "./credentials.ts";
import { checkMountHealth } from "./health.ts";
import { renderArgs } from "./mount_options.ts";
import { type MountpointPod, type MountpointPods, podUser } from "./mountpoint_pods.ts";
import type { PublishParams } from "./publish_request.ts";
import { sleep } from "../util/sleep.ts";

const log = logger("node", "publisher");

/** Timeouts of the publish steps, in milliseconds. */
export interface PublishTimeouts {
  /** Waiting for the S3PA assignment. */
  readonly attachmentMs: number;
  /** Waiting for the Mountpoint Pod to be Running. */
  readonly podRunningMs: number;
  /** Connecting to the mounter's socket. */
  readonly connectMs: number;
  /** Waiting for the engine to answer on the new mount. */
  readonly readyMs: number;
  /** The bucket probe. */
  readonly probeMs: number;
  /** A health stat of an existing mount. */
  readonly healthMs: number;
}

/** Defaults for {@link PublishTimeouts}. */
export const DEFAULT_TIMEOUTS: PublishTimeouts = {
  attachmentMs: 90_000,
  podRunningMs: 90_000,
  connectMs: 30_000,
  readyMs: 30_000,
  probeMs: 10_000,
  healthMs: 3_000,
};

/** Everything the publisher needs. */
export interface PublisherOptions {
  readonly sys: Sys;
  readonly files: Files;
  readonly pods: MountpointPods;
  readonly locks: KeyedMutex;
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
  readonly timeouts?: Partial<PublishTimeouts>;
}

/** What a publish did. */
export type PublishOutcome = "already-published" | "bind" | "source-and-bind";

/** The publish/unpublish work of one node. */
export class Publisher {
  readonly #o: PublisherOptions;
  readonly #t: PublishTimeouts;

  /** Create a publisher. */
  constructor(options: PublisherOptions) {
    this.#o = options;
    this.#t = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  }

  /** Publish a validated request. @throws {CsiError} */
  async publish(
    p: PublishParams,
    secrets: Readonly<Record<string, string>> | null | undefined,
    signal?: AbortSignal,
  ): Promise<PublishOutcome> {
    const creds = resolveCredentials(p.authenticationSource, secrets, this.#o.env);
    const { sys, files, pods, locks } = this.#o;
    const existing = findMount(await sys.readMountInfo(), p.targetPath);
    if (existing && (await checkMountHealth(files, p.targetPath, this.#t.healthMs)).ok) {
      return "already-published";
    }
    const query = { podUID: p.podUID, volumeName: p.volumeName, volumeId: p.volumeId };
    // One budget for both waits: kubelet gives the whole call about 2 minutes.
    const deadline = performance.now() + Math.max(this.#t.attachmentMs, this.#t.podRunningMs);
    const mpName = await pods.waitForAssignment(query, this.#t.attachmentMs, signal);
    const remaining = Math.max(1, Math.min(this.#t.podRunningMs, deadline - performance.now()));
    const pod = await pods.waitForRunning(mpName, remaining, signal);
    return await locks.run(mpName, async () => {
      const source = sourceMountDir(this.#o.kubeletRoot, mpName);
      let mounts = await sys.readMountInfo();
      let srcMount = findMount(mounts, source);
      const target = findMount(mounts, p.targetPath);
      if (target) {
        const healthy = (await checkMountHealth(files, p.targetPath, this.#t.healthMs)).ok;
        if (healthy && srcMount && target.majorMinor === srcMount.majorMinor) {
          return "already-published";
        }
        log.warn("Target {target} is mounted but broken or stale; remounting", {
          target: p.targetPath,
        });
        await sys.unmount(p.targetPath, { detach: true });
      }
      if (srcMount) {
        const health = await checkMountHealth(files, source, this.#t.healthMs);
        if (!health.ok) {
          log.warn("Source mount {source} is dead ({problem}); mounting it again", {
            source,
            problem: health.problem,
          });
          await sys.unmount(source, { detach: true });
          srcMount = undefined;
        }
      }
      let outcome: PublishOutcome = "bind";
      if (!srcMount) {
        await this.#mountSource(p, creds, mpName, pod, source, signal);
        outcome = "source-and-bind";
        mounts = await sys.readMountInfo();
      }
      await files.mkdir(p.targetPath, { recursive: true, mode: 0o750 });
      try {
        await sys.bindMount(source, p.targetPath, { readOnly: p.readOnlyTarget });
      } catch (err) {
        throw internal(
          `Could not bind-mount the volume on "${p.targetPath}": ${errorMessage(err)}`,
          { cause: err },
        );
      }
      return outcome;
    });
  }

  /** Unmount and remove a target; idempotent. @throws {CsiError} Internal when it stays mounted */
  async unpublish(targetPath: string): Promise<"unmounted" | "not-mounted"> {
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

  async #mountSource(
    p: PublishParams,
    creds: S3Credentials,
    mpName: string,
    pod: MountpointPod,
    source: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const { sys, files } = this.#o;
    const ns = pod.metadata?.namespace ?? "";
    const uid = pod.metadata?.uid;
    if (!uid) throw internal(`Mountpoint Pod ${ns}/${mpName} has no UID`);
    const comm = hostCommDir(this.#o.kubeletRoot, uid);
    if (!(await files.stat(comm))?.isDirectory) {
      throw failedPrecondition(
        `The comm directory of Mountpoint Pod ${ns}/${mpName} is missing at "${comm}": the pod must have the "comm" emptyDir, and --kubelet-path must be the kubelet root`,
      );
    }
    const t0 = performance.now();
    // The bucket check runs while the files are prepared; it must pass before anything is mounted.
    const probing = this.#o.probe ? this.#probe(p, creds) : Promise.resolve();
    probing.catch(() => {});
    await this.#writeCredentials(comm, creds, podUser(pod));
    await files.remove(`${comm}/${MOUNT_ERROR}`);
    const message = this.#message(p, creds);
    await files.mkdir(source, { recursive: true, mode: 0o755 });
    try {
      await probing;
    } catch (err) {
      // Nothing was mounted: leave no credentials behind for a volume that failed its check.
      await files.remove(`${comm}/${CREDENTIALS_DIR}`, { recursive: true }).catch(() => false);
      throw err;
    }
    const probed = performance.now();
    try {
      await this.#mountAndHandOver(
        source,
        comm,
        message,
        p.readOnlyVolume,
        `${ns}/${mpName}`,
        signal,
      );
    } catch (err) {
      // Nothing is mounted from this pod: its credentials go too.
      await files.remove(`${comm}/${CREDENTIALS_DIR}`, { recursive: true }).catch(() => false);
      throw err;
    }
    const sent = performance.now();
    await this.#waitReady(source, comm, `${ns}/${mpName}`, p.bucket).catch(async (err) => {
      await files.remove(`${comm}/${CREDENTIALS_DIR}`, { recursive: true }).catch(() => false);
      throw err;
    });
    const ready = performance.now();
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
        pod: `${ns}/${mpName}`,
        credentialSource: creds.source,
        accessKeyId: creds.accessKeyId,
        probeMs: Math.round(probed - t0),
        sendMs: Math.round(sent - probed),
        readyMs: Math.round(ready - sent),
      },
    );
  }

  /** Open /dev/fuse, mount the source, send options + fd to the mounter, close our fd. */
  async #mountAndHandOver(
    source: string,
    comm: string,
    message: MountMessage,
    readOnly: boolean,
    pod: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const { sys } = this.#o;
    const fd = sys.openFuse();
    try {
      await sys.mountFuse(source, { fd, readOnly, allowOther: true });
      try {
        const conn = await sys.connectUnix(`${comm}/${MOUNT_SOCK}`, {
          timeoutMs: this.#t.connectMs,
          ...(signal ? { signal } : {}),
        });
        try {
          await sys.sendWithFd(conn, encodeMountMessage(message), fd, { timeoutMs: 10_000 });
        } finally {
          conn.close();
        }
      } catch (err) {
        await sys.unmount(source, { detach: true }).catch(() => {});
        throw new CsiError(
          Code.UNAVAILABLE,
          `Could not hand the mount to Mountpoint Pod ${pod} (socket "${comm}/${MOUNT_SOCK}"): ${
            errorMessage(err)
          }. The pod may have exited: see kubectl logs -n ${pod.replace("/", " ")}`,
          { cause: err },
        );
      }
    } finally {
      sys.closeFd(fd);
    }
  }

  async #probe(p: PublishParams, creds: S3Credentials): Promise<void> {
    const region = String(p.options.get("region") ?? this.#o.region);
    const result = await this.#o.probe!.probe({
      bucket: p.bucket,
      endpoint: this.#o.endpoint,
      region,
      forcePathStyle: true,
      accessKeyId: creds.accessKeyId,
      secretAccessKey: creds.secretAccessKey,
      sessionToken: creds.sessionToken,
    }, this.#t.probeMs);
    if (result.ok) return;
    const who = `${creds.source} credentials (access key ${creds.accessKeyId})`;
    switch (result.reason) {
      case "no-such-bucket":
        throw failedPrecondition(
          `Bucket "${p.bucket}" does not exist on ${
            this.#o.endpoint ?? "AWS S3"
          }: create it or fix volumeAttributes.bucketName`,
        );
      case "access-denied":
        throw new CsiError(
          Code.PERMISSION_DENIED,
          `Access to bucket "${p.bucket}" was denied for the ${who}: check the keys and the bucket policy`,
        );
      case "unreachable":
        throw new CsiError(
          Code.UNAVAILABLE,
          `S3 endpoint ${
            this.#o.endpoint ?? "(AWS)"
          } is unreachable while checking bucket "${p.bucket}": ${result.message}`,
        );
      default:
        throw failedPrecondition(`Checking bucket "${p.bucket}" failed: ${result.message}`);
    }
  }

  async #writeCredentials(
    comm: string,
    creds: S3Credentials,
    user: { uid: number; gid: number },
  ): Promise<void> {
    const { files } = this.#o;
    const dir = `${comm}/${CREDENTIALS_DIR}`;
    await files.mkdir(dir, { mode: 0o700 });
    await files.chown(dir, user.uid, user.gid);
    const opts = { mode: 0o600, uid: user.uid, gid: user.gid };
    await files.writeFile(`${dir}/${CREDENTIALS_FILE}`, credentialsFileText(creds), opts);
    await files.writeFile(`${dir}/${CONFIG_FILE}`, configFileText(), opts);
  }

  #message(p: PublishParams, creds: S3Credentials): MountMessage {
    const options = new Map(p.options);
    const attempts = options.get("aws-max-attempts");
    options.delete("aws-max-attempts");
    options.set(
      "user-agent-prefix",
      `s3-csi-driver/${DRIVER_VERSION} credential-source#${creds.source}`,
    );
    const region = String(options.get("region") ?? this.#o.region);
    const env = [
      ...credentialsEnv(),
      `AWS_REGION=${region}`,
      ...(this.#o.endpoint ? [`AWS_ENDPOINT_URL=${this.#o.endpoint}`] : []),
      ...(attempts !== undefined ? [`AWS_MAX_ATTEMPTS=${attempts}`] : []),
    ].sort();
    return {
      bucketName: p.bucket,
      args: renderArgs(options),
      env,
      volumeId: p.volumeId,
      ...(p.engine ? { engine: p.engine } : {}),
    };
  }

  /** Wait for the engine to answer, or for the mounter to report an error. */
  async #waitReady(source: string, comm: string, pod: string, bucket: string): Promise<void> {
    const { sys, files } = this.#o;
    const stop = new AbortController();
    const errorFile = `${comm}/${MOUNT_ERROR}`;
    const watchError = (async () => {
      while (!stop.signal.aborted) {
        const text = await files.readTextFile(errorFile).catch(() => undefined);
        if (text) return text.trim();
        await sleep(25, stop.signal);
      }
      return undefined;
    })();
    const ready = sys.waitMountReady(source, { timeoutMs: this.#t.readyMs, signal: stop.signal })
      .then(() => undefined);
    try {
      const first = await Promise.race([ready, watchError.then((t) => t ?? undefined)]);
      if (first !== undefined) {
        stop.abort(new Error(first));
        await ready.catch(() => {});
        throw failedPrecondition(
          `Mountpoint Pod ${pod} could not mount bucket "${bucket}": ${first.slice(-2000)}`,
        );
      }
    } catch (err) {
      await sys.unmount(source, { detach: true }).catch(() => {});
      if (err instanceof CsiError) throw err;
      // A mounter that refuses the message closes the fd, so the stat may fail (ENOTCONN) just
      // before its mount.error lands: give it a moment, it is the better explanation.
      let reported = await files.readTextFile(errorFile).catch(() => undefined);
      if (!reported) {
        await sleep(100);
        reported = await files.readTextFile(errorFile).catch(() => undefined);
      }
      if (reported?.trim()) {
        throw failedPrecondition(
          `Mountpoint Pod ${pod} could not mount bucket "${bucket}": ${
            reported.trim().slice(-2000)
          }`,
        );
      }
      throw new CsiError(
        Code.DEADLINE_EXCEEDED,
        `The FUSE engine of Mountpoint Pod ${pod} did not answer for bucket "${bucket}": ${
          errorMessage(err)
        }. See kubectl logs -n ${pod.split("/")[0]} ${pod.split("/")[1]}`,
        { cause: err },
      );
    } finally {
      stop.abort();
      await watchError.catch(() => {});
    }
  }
}
