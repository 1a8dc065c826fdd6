/**
 * The mounter's logic (entrypoint of Mountpoint Pods):
 *
 * 1. Listen on `comm/mount.sock`; accept connections from **root only** (SO_PEERCRED; others are
 *    closed and logged).
 * 2. Read one message (bounded size) with **exactly one** fd, which must be `/dev/fuse`; validate
 *    the JSON and the engine options. A bad message is reported in `mount.error` (so the node
 *    plugin fails fast with the reason) and the mounter keeps waiting for a good one.
 * 3. Replace itself (`execve`, same PID) with the resident supervisor (`supervisor_command.ts`),
 *    which keeps the fd, runs the engine on `/dev/fd/N` (only that fd inherited, output to the pod
 *    log), restarts it on the same FUSE connection when it dies (mount-s3 with a session), honours
 *    SIGTERM with the drain grace and `mount.exit`, and exits with the codes of
 *    `mppod/exit_codes.ts`. The Deno runtime is gone from then on: an idle Mountpoint Pod holds the
 *    engine and a small supervisor only.
 *
 * @module
 */
import {
  MOUNTER_EXIT_ENGINE_FAILED,
  MOUNTER_EXIT_NO_MESSAGE,
  MOUNTER_EXIT_OK,
} from "../mppod/exit_codes.ts";
import {
  type Engine,
  MAX_MOUNT_MESSAGE_BYTES,
  type MountMessage,
  parseMountMessage,
} from "../mppod/mount_message.ts";
import { MOUNT_ERROR, MOUNT_EXIT, MOUNT_SOCK } from "../mppod/paths.ts";
import { FUSE_DEVICE } from "../sys/mount.ts";
import { SysError } from "../sys/errno.ts";
import type { Files } from "../sys/files.ts";
import type { ProcessSpawner } from "../sys/process.ts";
import type { Sys, SysListener } from "../sys/sys.ts";
import { ConfigError, errorMessage, TimeoutError } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { type EngineCommand, engineCommand, type EngineContext } from "./engine_command.ts";
import { SUPERVISOR, type SupervisorCommand, supervisorCommand } from "./supervisor_command.ts";

const log = logger("mounter");

/** While waiting for the mount message, how often `mount.exit` is looked for. */
export const EXIT_POLL_MS = 1000;

/** Options of {@link Mounter}. */
export interface MounterOptions {
  readonly sys: Sys;
  readonly files: Files;
  readonly spawner: ProcessSpawner;
  /** The comm dir shared with the node plugin. */
  readonly commDir: string;
  /** A private writable directory (engine HOME). */
  readonly workDir: string;
  /** Where the engine keeps its session table (in the pod's `work` volume), when it has one. */
  readonly sessionDir?: string | undefined;
  /** The pod's cache volume (engine caches), when it has one. */
  readonly cacheDir?: string | undefined;
  /** The pod's custom CA bundle, when it has one. */
  readonly caBundle?: string | undefined;
  /** The engine's metrics endpoint (port > 0) and labels, from the pod (engine_metrics.ts). */
  readonly metrics?: EngineContext["metrics"];
  /** How long to wait for a valid mount message. */
  readonly receiveTimeoutMs: number;
  /**
   * On SIGTERM while serving, keep the mount up to this long for the workloads still using it
   * (node drain: workloads and Mountpoint Pods are evicted together), until the node plugin
   * requests the exit (`mount.exit`). 0 forwards SIGTERM to the engine at once. @default 0
   */
  readonly drainGraceMs?: number;
  /**
   * Engine when the message names none (the node plugin always names one): `auto` = mount-s3 if
   * on PATH, else rclone.
   */
  readonly engine: "auto" | Engine;
  /** Peer uids allowed to send. @default [0] */
  readonly allowUids?: readonly number[];
  /** Time allowed to read one message after the connection. @default 10000 */
  readonly messageTimeoutMs?: number;
}

interface Received {
  readonly message: MountMessage;
  readonly fd: number;
  readonly command: EngineCommand;
  readonly supervisor: SupervisorCommand;
}

/** One run of the mounter. */
export class Mounter {
  readonly #o: MounterOptions;

  /** Create a mounter. */
  constructor(options: MounterOptions) {
    this.#o = options;
  }

  #path(name: string): string {
    return `${this.#o.commDir}/${name}`;
  }

  async #exitRequested(): Promise<boolean> {
    return (await this.#o.files.stat(this.#path(MOUNT_EXIT)).catch(() => undefined)) !== undefined;
  }

  async #reportError(text: string): Promise<void> {
    log.error("{error}", { error: text });
    await this.#o.files.writeFile(this.#path(MOUNT_ERROR), `${text}\n`, { mode: 0o644 })
      .catch((err) =>
        log.error("Could not write {file}: {error}", {
          file: MOUNT_ERROR,
          error: errorMessage(err),
        })
      );
  }

  /**
   * Run until a valid mount message arrives, then replace this process with the supervisor (never
   * returns then); resolves with the exit code when no message arrives or the exec fails.
   */
  async run(signal: AbortSignal): Promise<number> {
    const { sys, files } = this.#o;
    if (!(await files.stat(this.#o.commDir).catch(() => undefined))?.isDirectory) {
      throw new ConfigError(
        `comm dir "${this.#o.commDir}" does not exist or is not a directory: mount the comm emptyDir there`,
      );
    }
    const listener = await sys.listenUnix(this.#path(MOUNT_SOCK), { mode: 0o600 });
    let received: Received | undefined;
    try {
      received = await this.#receive(listener, signal);
    } finally {
      listener.close();
      await files.remove(this.#path(MOUNT_SOCK)).catch(() => false);
    }
    if (received === undefined) {
      return (await this.#exitRequested()) || signal.aborted
        ? MOUNTER_EXIT_OK
        : MOUNTER_EXIT_NO_MESSAGE;
    }
    return await this.#execSupervisor(received);
  }

  async #receive(listener: SysListener, signal: AbortSignal): Promise<Received | undefined> {
    const { sys } = this.#o;
    const deadline = performance.now() + this.#o.receiveTimeoutMs;
    log.info("Waiting for the mount message on {socket}", { socket: listener.path });
    for (;;) {
      if (await this.#exitRequested()) {
        log.info("mount.exit present before any mount; exiting");
        return undefined;
      }
      const remaining = deadline - performance.now();
      let conn;
      try {
        // Accept in short slices so a `mount.exit` written meanwhile (the publish failed before
        // anything was mounted, the pod is released) ends the wait at once.
        conn = await sys.accept(listener, {
          timeoutMs: Math.max(0, Math.min(remaining, EXIT_POLL_MS)),
          allowUids: this.#o.allowUids ?? [0],
          signal,
        });
      } catch (err) {
        if (signal.aborted) return undefined;
        if (err instanceof TimeoutError) {
          if (deadline - performance.now() > 0) continue;
          if (!(await this.#exitRequested())) {
            await this.#reportError(
              `No mount message arrived on ${listener.path} within ${this.#o.receiveTimeoutMs} ms; the node plugin never published a volume through this pod`,
            );
          }
          return undefined;
        }
        throw err;
      }
      let fds: readonly number[] = [];
      try {
        const peer = sys.peerCredentials(conn);
        const msg = await sys.receiveWithFds(conn, {
          maxBytes: MAX_MOUNT_MESSAGE_BYTES,
          exactFds: 1,
          timeoutMs: this.#o.messageTimeoutMs ?? 10_000,
          signal,
        });
        fds = msg.fds;
        const fd = fds[0]!;
        if (!sys.isFuseDevice(fd)) {
          throw new Error(
            `The received fd refers to "${sys.fdTarget(fd)}", not the FUSE device ${FUSE_DEVICE}`,
          );
        }
        const message = parseMountMessage(msg.bytes);
        const command = await this.#command(message, fd);
        const supervisor = await this.#supervisor(message, command, fd);
        log.info("Received mount of bucket {bucket} (volume {volumeId}) from pid {pid}", {
          bucket: message.bucketName,
          volumeId: message.volumeId ?? "",
          pid: peer.pid,
          engine: command.engine,
          protocol: message.protocolVersion ?? 1,
          session: message.session?.id ?? "",
          resume: message.session?.resume ?? false,
          resumable: supervisor.resumable,
        });
        return { message, fd, command, supervisor };
      } catch (err) {
        // Report before closing the fd: closing it ends the FUSE connection, and the node plugin
        // should find the reason already written when it sees that.
        if (!signal.aborted) {
          await this.#reportError(`Refused a mount message: ${errorMessage(err)}`);
        }
        for (const fd of fds) {
          try {
            sys.closeFd(fd);
          } catch { /* already closed */ }
        }
        if (signal.aborted) return undefined;
      } finally {
        conn.close();
      }
    }
  }

  async #command(message: MountMessage, fd: number): Promise<EngineCommand> {
    const { spawner } = this.#o;
    let engine: Engine | undefined = message.engine ??
      (this.#o.engine === "auto" ? undefined : this.#o.engine);
    let program: string | undefined;
    if (engine === undefined) {
      program = await spawner.lookPath("mount-s3");
      engine = program ? "mount-s3" : "rclone";
    }
    program ??= await spawner.lookPath(engine);
    if (!program) {
      throw new Error(
        `Engine "${engine}" is not installed in this Mountpoint Pod image (not on PATH)`,
      );
    }
    return engineCommand(engine, message, fd, {
      commDir: this.#o.commDir,
      workDir: this.#o.workDir,
      cacheDir: this.#o.cacheDir,
      caBundle: this.#o.caBundle,
      metrics: this.#o.metrics,
      program,
    });
  }

  async #supervisor(
    message: MountMessage,
    command: EngineCommand,
    fd: number,
  ): Promise<SupervisorCommand> {
    const program = await this.#o.spawner.lookPath(SUPERVISOR);
    if (!program) {
      throw new Error(
        `${SUPERVISOR} is not installed in this Mountpoint Pod image (not on PATH): use the Mountpoint image of this driver version`,
      );
    }
    return supervisorCommand(message, command, {
      program,
      commDir: this.#o.commDir,
      fd,
      sessionDir: this.#o.sessionDir,
      drainGraceMs: this.#o.drainGraceMs ?? 0,
    });
  }

  /**
   * Step 3: hand over to the supervisor. Only the FUSE fd is inherited (everything else of this
   * process is close-on-exec). Returns only when the exec failed.
   */
  async #execSupervisor(r: Received): Promise<number> {
    const { sys, files } = this.#o;
    await files.remove(this.#path(MOUNT_ERROR)).catch(() => false);
    log.info("Handing over to {supervisor}, which runs {engine} for bucket {bucket}", {
      supervisor: r.supervisor.program,
      engine: r.command.engine,
      bucket: r.message.bucketName,
    });
    try {
      sys.clearCloexec(r.fd);
      return sys.execReplace(r.supervisor.program, r.supervisor.argv, r.supervisor.env);
    } catch (err) {
      // Only the kernel's refusal (ENOENT, EACCES, ENOEXEC …) comes back here.
      if (!(err instanceof SysError)) throw err;
      await this.#reportError(
        `Could not start ${r.supervisor.program} for ${r.command.engine}: ${errorMessage(err)}`,
      );
      sys.closeFd(r.fd);
      return MOUNTER_EXIT_ENGINE_FAILED;
    }
  }
}
