/**
 * The node plugin's custody of FUSE connections: the fd it opened for a source mount stays open
 * here for as long as the source is mounted, so the connection survives a Mountpoint container
 * that dies as a whole (an OOM kill of the container, a restart). Inside the container the
 * supervisor holds the same file and restarts a dead engine itself; this covers the rest.
 *
 * A restarted Mountpoint container starts a new mounter, which listens on `mount.sock` again while
 * the supervisor it replaced never does. So a held source whose comm dir has a `mount.sock` has a
 * mounter waiting: it gets the same fd again with the same message, marked `resume`, and its
 * engine resumes the session (same inode numbers, the requests left unanswered sent again). A
 * mounter that refuses (its `mount.error`) is retried with a pause, a few times; then the
 * connection is aborted on purpose (workloads get an error instead of a hang) and released.
 *
 * A supervisor that gave its engine up (it kept dying) writes `mount.error` and answers EIO: the
 * pod is then marked broken, so the controller tells its workloads why and replaces it.
 *
 * What is held is also recorded in the node plugin's own sessions dir (`sessionsDir`: pod UID,
 * source, connection, message — no secret), so that a restarted node plugin takes custody back
 * ({@link Custody.recover}): the supervisor, which kept the fd meanwhile, hands it over again on
 * its `custody.sock` to a root peer. Until then the connection survives engine restarts (the
 * supervisor) but not a restart of the whole container.
 *
 * Only what this process knows is trusted: the pod's answer is read bounded through the comm dir's
 * {@link DirHandle}, the socket is reached without following links, and a held fd is sent only to
 * the pod it was made for (same UID), while its source is still the same connection.
 *
 * @module
 */
import {
  encodeMountMessage,
  type MountMessage,
  parseMountMessage,
} from "../mppod/mount_message.ts";
import { CUSTODY_SOCK, MOUNT_ERROR, MOUNT_SOCK, sessionsDir } from "../mppod/paths.ts";
import type { DirHandle, Files } from "../sys/files.ts";
import { findMount } from "../sys/mountinfo.ts";
import type { Sys } from "../sys/sys.ts";
import { errorMessage } from "../util/errors.ts";
import type { KeyedMutex } from "../util/keyed_mutex.ts";
import { logger } from "../util/log.ts";
import { sleep } from "../util/sleep.ts";
import { openCommDir, readMountError, shortMessage } from "./comm_dir.ts";
import { handOver } from "./hand_over.ts";
import type { MountpointPods } from "./mountpoint_pods.ts";
import {
  fingerprintChanges,
  parseFingerprint,
  type PodFingerprint,
  podFingerprint,
} from "./pod_fingerprint.ts";

const log = logger("node", "custody");

/** A source mount whose FUSE fd this process holds. */
export interface Held {
  /** The fd (open on the connection). */
  readonly fd: number;
  /** The Mountpoint Pod's UID (its comm dir). */
  readonly podUid: string;
  /** The source mount's path and its `st_dev` when it was made. */
  readonly source: string;
  readonly majorMinor: string;
  /** The message of the first start (protocol 2, with the session). */
  readonly message: MountMessage;
  /** The pod as it was when it got the connection: only that pod gets it again. */
  readonly pod: PodFingerprint;
}

/** Options of {@link Custody}. */
export interface CustodyOptions {
  readonly sys: Sys;
  readonly files: Files;
  readonly kubeletRoot: string;
  /** Per-Mountpoint-Pod locks, shared with the publisher and the unmounter. */
  readonly locks: KeyedMutex;
  /** How often the held sources are looked at. @default 200 */
  readonly pollMs?: number;
  /** How long a mounter has to take the fd (its socket gone) or refuse it. @default 5000 */
  readonly answerMs?: number;
  /** Refused hand-overs before the connection is given up. @default 3 */
  readonly maxRefusals?: number;
  /** Pause after the n-th refusal: n times this. @default 2000 */
  readonly refusalPauseMs?: number;
  /**
   * Marks a Mountpoint Pod broken (the controller replaces it); reads a pod fresh from the API
   * server before a hand-over again.
   */
  readonly pods: Pick<MountpointPods, "markBroken" | "fetch" | "pod">;
  /** How long the fresh read of a pod may take before the watch's copy is used. @default 2000 */
  readonly fetchMs?: number;
  /** How often a serving pod's `mount.error` is looked for (its supervisor gave up). @default 2000 */
  readonly givenUpPollMs?: number;
}

/** What {@link Custody.check} did. */
export type CustodyOutcome =
  | "idle"
  | "resent"
  | "refused"
  | "released"
  | "aborted"
  | "given-up";

/** What the sessions dir keeps of a held session. */
interface SessionRecord {
  readonly podUid: string;
  readonly source: string;
  readonly majorMinor: string;
  readonly message: MountMessage;
  readonly pod: PodFingerprint;
}

/** A record read back; undefined when it is not one (only root writes the dir, but be strict). */
function parseRecord(text: string): SessionRecord | undefined {
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    if (
      typeof o.podUid !== "string" || typeof o.source !== "string" ||
      typeof o.majorMinor !== "string"
    ) return undefined;
    const message = parseMountMessage(new TextEncoder().encode(JSON.stringify(o.message)));
    const pod = parseFingerprint(o.pod);
    if (!message.session || !pod) return undefined;
    return { podUid: o.podUid, source: o.source, majorMinor: o.majorMinor, message, pod };
  } catch {
    return undefined;
  }
}

interface Entry extends Held {
  refusals: number;
  /** No retry before this time (after a refusal). */
  notBefore: number;
  /** When `mount.error` is looked for next. */
  nextErrorCheck: number;
  /** The pod was marked broken. */
  broken: boolean;
}

/** The FUSE fds the node plugin holds, by Mountpoint Pod name. */
export class Custody {
  readonly #o: CustodyOptions;
  readonly #held = new Map<string, Entry>();

  /** Create an empty custody. */
  constructor(options: CustodyOptions) {
    this.#o = options;
  }

  /** Sources held. */
  get size(): number {
    return this.#held.size;
  }

  /** Whether the source of `mp` is held. */
  has(mp: string): boolean {
    return this.#held.has(mp);
  }

  /**
   * Hold `held.fd` for `mp` (replacing, and closing, what was held for it) and record it in the
   * sessions dir, so that a restarted node plugin can take it back.
   */
  async hold(mp: string, held: Held): Promise<void> {
    this.#forget(mp);
    this.#held.set(mp, { ...held, refusals: 0, notBefore: 0, nextErrorCheck: 0, broken: false });
    const { files, kubeletRoot } = this.#o;
    const record: SessionRecord = {
      podUid: held.podUid,
      source: held.source,
      majorMinor: held.majorMinor,
      message: held.message,
      pod: held.pod,
    };
    try {
      await files.mkdir(sessionsDir(kubeletRoot), { recursive: true, mode: 0o700 });
      await files.writeFile(this.#recordPath(mp), JSON.stringify(record), { mode: 0o600 });
    } catch (err) {
      log.warn(
        "Could not record the session of {pod}: a restart of this node plugin loses its custody ({error})",
        {
          pod: mp,
          error: errorMessage(err),
        },
      );
    }
  }

  /** Close the fd held for `mp`, if any (its source is unmounted, or given up), and its record. */
  release(mp: string): void {
    this.#forget(mp);
    this.#o.files.remove(this.#recordPath(mp)).catch(() => false);
  }

  #recordPath(mp: string): string {
    return `${sessionsDir(this.#o.kubeletRoot)}/${mp}.json`;
  }

  /** Close the fd held for `mp` (the record stays). */
  #forget(mp: string): void {
    const e = this.#held.get(mp);
    if (!e) return;
    this.#held.delete(mp);
    try {
      this.#o.sys.closeFd(e.fd);
    } catch (err) {
      log.warn("Could not close the FUSE fd of {pod}: {error}", {
        pod: mp,
        error: errorMessage(err),
      });
    }
  }

  /**
   * After a restart of this process: take back the custody of every recorded session whose source
   * is still mounted on the same connection — its supervisor hands the fd over on `custody.sock`.
   * Records of sources that are gone are removed. Resolves with the pods taken back. Needs no API.
   */
  async recover(signal: AbortSignal): Promise<string[]> {
    const { files, sys, kubeletRoot } = this.#o;
    const recovered: string[] = [];
    const names = await files.readDir(sessionsDir(kubeletRoot)).catch(() => []);
    const mounts = await sys.readMountInfo();
    for (const name of names.filter((n) => n.endsWith(".json"))) {
      const mp = name.slice(0, -".json".length);
      if (this.#held.has(mp)) continue;
      try {
        const r = await this.#o.locks.run(mp, () => this.#recoverOne(mp, mounts, signal), signal);
        if (r) recovered.push(mp);
      } catch (err) {
        if (signal.aborted) throw err;
        log.warn("Could not take back the custody of {pod}: {error}", {
          pod: mp,
          error: errorMessage(err),
        });
      }
    }
    if (recovered.length) {
      log.info("Took back the custody of {count} FUSE connections: {pods}", {
        count: recovered.length,
        pods: recovered,
      });
    }
    return recovered;
  }

  async #recoverOne(
    mp: string,
    mounts: readonly { mountPoint: string; majorMinor: string }[],
    signal: AbortSignal,
  ): Promise<boolean> {
    const { files, sys, kubeletRoot } = this.#o;
    const text = await files.readTextFile(this.#recordPath(mp));
    const record = text === undefined ? undefined : parseRecord(text);
    const src = record && mounts.find((m) => m.mountPoint === record.source);
    if (!record || src?.majorMinor !== record.majorMinor) {
      // Gone (unmounted meanwhile, a node reboot) or not ours to read: nothing to take back.
      await files.remove(this.#recordPath(mp)).catch(() => false);
      return false;
    }
    using comm = await openCommDir(files, kubeletRoot, record.podUid);
    if (!comm) {
      log.info("Session of {pod} not taken back: its comm dir is gone", { pod: mp });
      return false;
    }
    using via = await comm.socketPath(CUSTODY_SOCK);
    if (!via) {
      log.info("Session of {pod} not taken back: its supervisor does not serve {socket}", {
        pod: mp,
        socket: CUSTODY_SOCK,
      });
      return false;
    }
    const conn = await sys.connectUnix(via.path, { timeoutMs: 1000, signal });
    let fds: readonly number[] = [];
    try {
      const msg = await sys.receiveWithFds(conn, {
        maxBytes: 4096,
        exactFds: 1,
        timeoutMs: 2000,
        signal,
      });
      fds = msg.fds;
      const fd = fds[0]!;
      const said = JSON.parse(new TextDecoder().decode(msg.bytes)) as { session?: unknown };
      if (!sys.isFuseDevice(fd) || said.session !== record.message.session?.id) {
        throw new Error("the pod handed back something else than its session's FUSE connection");
      }
      this.#held.set(mp, {
        fd,
        podUid: record.podUid,
        source: record.source,
        majorMinor: record.majorMinor,
        message: record.message,
        pod: record.pod,
        refusals: 0,
        notBefore: 0,
        nextErrorCheck: 0,
        broken: false,
      });
      fds = [];
      return true;
    } finally {
      conn.close();
      for (const fd of fds) sys.closeFd(fd);
    }
  }

  /** Close every held fd (the process stops); the records stay for the next start. */
  closeAll(): void {
    for (const mp of [...this.#held.keys()]) this.#forget(mp);
  }

  /**
   * Look after the source of `mp` once, under its lock: released when its connection is gone,
   * handed to a waiting mounter again, or left alone.
   */
  check(mp: string, signal: AbortSignal): Promise<CustodyOutcome> {
    return this.#o.locks.run(mp, () => this.#checkLocked(mp, signal), signal);
  }

  /** Check every held source every `pollMs` until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      for (const mp of [...this.#held.keys()]) {
        await this.check(mp, signal).catch((err) => {
          if (!signal.aborted) {
            log.warn("Custody check of {pod} failed: {error}", {
              pod: mp,
              error: errorMessage(err),
            });
          }
        });
      }
      await sleep(this.#o.pollMs ?? 200, signal).catch(() => {});
    }
  }

  async #checkLocked(mp: string, signal: AbortSignal): Promise<CustodyOutcome> {
    const { sys, files, kubeletRoot } = this.#o;
    const e = this.#held.get(mp);
    if (!e) return "released";
    const src = findMount(await sys.readMountInfo(), e.source);
    if (src?.majorMinor !== e.majorMinor) {
      // Unmounted (or mounted again on another connection) without us: nothing to keep.
      this.release(mp);
      return "released";
    }
    using comm = await openCommDir(files, kubeletRoot, e.podUid).catch(() => undefined);
    if (!comm) {
      this.release(mp);
      return "released";
    }
    using via = await comm.socketPath(MOUNT_SOCK).catch(() => undefined);
    if (!via) return await this.#givenUp(mp, e, comm, signal);
    if (performance.now() < e.notBefore) return "idle";
    // A new mounter waits: the Mountpoint container was restarted. Only the pod that got the
    // connection gets it again, as it was then (not with another image, nor a debug container).
    const pod = await this.#fetch(mp, signal);
    if (pod?.metadata?.uid !== e.podUid) {
      this.release(mp);
      return "released";
    }
    const changed = fingerprintChanges(e.pod, podFingerprint(pod));
    if (changed.length) {
      const reason = `its spec changed since it got its FUSE connection (${
        changed.join("; ")
      }): the connection is not handed to what it runs now`;
      log.error("Mountpoint Pod {pod}: {reason}", { pod: mp, reason });
      await this.#abort(mp, e);
      await this.#o.pods.markBroken(mp, reason, signal).catch((err) =>
        log.warn("Could not mark Mountpoint Pod {pod} broken: {error}", {
          pod: mp,
          error: errorMessage(err),
        })
      );
      return "aborted";
    }
    await comm.remove(MOUNT_ERROR).catch(() => false);
    const message: MountMessage = {
      ...e.message,
      session: { id: e.message.session!.id, resume: true },
    };
    let refused: string | undefined;
    try {
      await handOver(sys, comm, encodeMountMessage(message), e.fd, {
        connectMs: 1000,
        signal,
      });
      refused = await this.#answer(comm, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      refused = errorMessage(err);
    }
    if (refused === undefined) {
      e.refusals = 0;
      log.info(
        "The Mountpoint container of {pod} was restarted: its FUSE connection was handed over again, and its engine resumes the session",
        { pod: mp, source: e.source, session: e.message.session!.id },
      );
      return "resent";
    }
    e.refusals++;
    const max = this.#o.maxRefusals ?? 3;
    log.warn(
      "The restarted mounter of {pod} did not take its FUSE connection back ({n}/{max}): {report}",
      {
        pod: mp,
        n: e.refusals,
        max,
        report: shortMessage(refused),
      },
    );
    if (e.refusals < max) {
      e.notBefore = performance.now() + (this.#o.refusalPauseMs ?? 2000) * e.refusals;
      return "refused";
    }
    // Give up on purpose: workloads get an error instead of waiting on a connection nobody serves.
    await this.#abort(mp, e);
    log.error(
      "Gave up the FUSE connection of {pod} after {max} refused hand-overs: its workloads get errors until the volume is mounted again",
      { pod: mp, max },
    );
    return "aborted";
  }

  /** Abort the connection held for `mp` (its workloads get errors) and release it. */
  async #abort(mp: string, e: Entry): Promise<void> {
    const minor = Number(e.majorMinor.split(":")[1]);
    await this.#o.sys.abortFuseConnection(minor).catch((err) =>
      log.warn("Could not abort the FUSE connection of {pod}: {error}", {
        pod: mp,
        error: errorMessage(err),
      })
    );
    this.release(mp);
  }

  /**
   * The pod as the API server has it now; the watch's copy when the API server does not answer in
   * time (a restart must not wait for it; an image change needs it up).
   */
  async #fetch(mp: string, signal: AbortSignal) {
    const timeout = AbortSignal.timeout(this.#o.fetchMs ?? 2000);
    try {
      return await this.#o.pods.fetch(mp, AbortSignal.any([signal, timeout]));
    } catch (err) {
      signal.throwIfAborted();
      log.warn("Could not read Mountpoint Pod {pod} ({error}): its watched copy is checked", {
        pod: mp,
        error: errorMessage(err),
      });
      return this.#o.pods.pod(mp);
    }
  }

  /**
   * A serving pod (its supervisor runs): did the supervisor give its engine up (`mount.error`)?
   * Then the pod is marked broken, once.
   */
  async #givenUp(
    mp: string,
    e: Entry,
    comm: DirHandle,
    signal: AbortSignal,
  ): Promise<CustodyOutcome> {
    const now = performance.now();
    if (e.broken || now < e.nextErrorCheck) return "idle";
    e.nextErrorCheck = now + (this.#o.givenUpPollMs ?? 2000);
    const report = await readMountError(comm).catch(() => undefined);
    if (!report) return "idle";
    e.broken = true;
    log.error("The supervisor of {pod} gave its engine up: {report}", {
      pod: mp,
      report: shortMessage(report),
    });
    await this.#o.pods.markBroken(mp, `its engine was given up: ${shortMessage(report)}`, signal)
      .catch((err) =>
        log.warn("Could not mark Mountpoint Pod {pod} broken: {error}", {
          pod: mp,
          error: errorMessage(err),
        })
      );
    return "given-up";
  }

  /**
   * The mounter's answer to a hand-over: undefined when it took the fd (it replaced itself with
   * the supervisor: its socket is gone), else its report (or a timeout).
   */
  async #answer(comm: DirHandle, signal: AbortSignal): Promise<string | undefined> {
    const deadline = performance.now() + (this.#o.answerMs ?? 5000);
    while (performance.now() < deadline) {
      const report = await readMountError(comm);
      if (report) return report;
      using via = await comm.socketPath(MOUNT_SOCK).catch(() => undefined);
      if (!via) return undefined;
      await sleep(25, signal);
    }
    return `no answer within ${this.#o.answerMs ?? 5000} ms`;
  }
}
