/**
 * The mounter's logic (entrypoint of Mountpoint Pods):
 *
 * 1. Listen on `comm/mount.sock`; accept connections from **root only** (SO_PEERCRED; others are
 *    closed and logged).
 * 2. Read one message (bounded size) with **exactly one** fd, which must be `/dev/fuse`; validate
 *    the JSON and the engine options. A bad message is reported in `mount.error` (so the node
 *    plugin fails fast with the reason) and the mounter keeps waiting for a good one.
 * 3. Run the engine on `/dev/fd/N` (only that fd inherited), its output going to the pod log;
 *    forward SIGTERM/SIGINT to it.
 * 4. When it exits: `mount.exit` present → exit 0 (the node plugin asked); otherwise write
 *    `mount.error` and exit non-zero so the container restarts and waits for a new mount.
 *
 * @module
 */
import {
  MOUNTER_EXIT_ENGINE_FAILED,
  MOUNTER_EXIT_NO_MESSAGE,
  MOUNTER_EXIT_OK,
  MOUNTER_EXIT_RESTART,
} from "../mppod/exit_codes.ts";
import {
  type Engine,
  MAX_MOUNT_MESSAGE_BYTES,
  type MountMessage,
  parseMountMessage,
} from "../mppod/mount_message.ts";
import { MOUNT_ERROR, MOUNT_EXIT, MOUNT_SOCK } from "../mppod/paths.ts";
import { FUSE_DEVICE } from "../sys/mount.ts";
import type { Files } from "../sys/files.ts";
import type { ProcessSpawner } from "../sys/process.ts";
import type { Sys, SysListener } from "../sys/sys.ts";
import { ConfigError, errorMessage, TimeoutError } from "../util/errors.ts";
import { logger } from "../util/log.ts";
import { type EngineCommand, engineCommand, type EngineContext } from "./engine_command.ts";

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

  /** Run until the engine ends (or no message arrives); resolves with the exit code. */
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
    return await this.#runEngine(received, signal);
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
        log.info("Received mount of bucket {bucket} (volume {volumeId}) from pid {pid}", {
          bucket: message.bucketName,
          volumeId: message.volumeId ?? "",
          pid: peer.pid,
          engine: command.engine,
        });
        return { message, fd, command };
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

  /**
   * Stop the engine, after the drain grace: wait until the node plugin asks for the exit
   * (`mount.exit`), the engine ends by itself (unmounted), or the grace runs out.
   */
  async #stopAfterDrain(exited: () => boolean, kill: () => void): Promise<void> {
    const grace = this.#o.drainGraceMs ?? 0;
    if (grace > 0 && !(await this.#exitRequested())) {
      log.info(
        "Termination requested: serving the mount for up to {ms} ms until the node plugin unmounts it",
        {
          ms: grace,
        },
      );
      const deadline = Date.now() + grace;
      while (!exited() && Date.now() < deadline && !(await this.#exitRequested())) {
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    if (!exited()) kill();
  }

  async #runEngine(r: Received, signal: AbortSignal): Promise<number> {
    const { sys, spawner, files } = this.#o;
    await files.remove(this.#path(MOUNT_ERROR)).catch(() => false);
    let child;
    try {
      sys.clearCloexec(r.fd);
      child = spawner.spawn({
        command: r.command.command,
        args: r.command.args,
        env: r.command.env,
      });
    } catch (err) {
      await this.#reportError(`Could not start ${r.command.engine}: ${errorMessage(err)}`);
      return MOUNTER_EXIT_ENGINE_FAILED;
    } finally {
      sys.closeFd(r.fd);
    }
    log.info("Started {engine} (pid {pid}) for bucket {bucket}", {
      engine: r.command.engine,
      pid: child.pid,
      bucket: r.message.bucketName,
    });
    let exited = false;
    const forward = () => void this.#stopAfterDrain(() => exited, () => child.kill("SIGTERM"));
    signal.addEventListener("abort", forward, { once: true });
    const status = await child.status;
    exited = true;
    signal.removeEventListener("abort", forward);
    if (await this.#exitRequested()) {
      log.info("{engine} exited ({code}) after an unmount request; exiting 0", {
        engine: r.command.engine,
        code: status.code,
      });
      return MOUNTER_EXIT_OK;
    }
    const how = status.signal
      ? `was killed by ${status.signal}`
      : `exited with code ${status.code}`;
    await this.#reportError(
      `${r.command.engine} ${how} without an unmount request: ${
        child.stderrTail().trim().slice(-4000)
      }`,
    );
    return status.code === 0 && !status.signal ? MOUNTER_EXIT_RESTART : MOUNTER_EXIT_ENGINE_FAILED;
  }
}
