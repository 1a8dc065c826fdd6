/**
 * The command line of the resident supervisor (`s3-csi-supervisor`, a binary of `src/engine/`)
 * that the mounter replaces itself with once it has checked a mount message: it keeps the FUSE fd,
 * runs the engine and restarts it (resuming the session) when it dies. The contract between the
 * two binaries — flags, the engine after `--`, exit codes, `mount.error`/`mount.exit` — is
 * documented in `src/engine/src/supervisor/main.rs`, which parses it.
 *
 * Pure: unit-tested without permissions.
 *
 * @module
 */
import type { MountMessage } from "../mppod/mount_message.ts";
import type { EngineCommand } from "./engine_command.ts";

/** Name of the supervisor on PATH in the Mountpoint image. */
export const SUPERVISOR = "s3-csi-supervisor";

/** What the supervisor needs besides the engine command. */
export interface SupervisorContext {
  /** The supervisor's path (from the PATH lookup). */
  readonly program: string;
  readonly commDir: string;
  /** The FUSE fd, inherited by the supervisor and the engine. */
  readonly fd: number;
  /** Where the engine keeps its session table, when the pod has a `work` volume. */
  readonly sessionDir?: string | undefined;
  /** SIGTERM: keep serving up to this long until `mount.exit`. */
  readonly drainGraceMs: number;
}

/** A ready-to-exec supervisor command. */
export interface SupervisorCommand {
  readonly program: string;
  /** `argv`, `argv[0]` included. */
  readonly argv: string[];
  /** The engine's environment (the supervisor passes its own on, unchanged). */
  readonly env: Record<string, string>;
  /** Whether a dead engine is restarted on the same connection. */
  readonly resumable: boolean;
}

/** Why a message cannot be served as asked. */
export class SessionError extends Error {
  override name = "SessionError";
}

/**
 * The supervisor command running `engine` for `message`. The session (protocol 2) makes the engine
 * resumable when it is mount-s3 and the pod has a work volume for its table.
 * @throws {SessionError} when the message asks to resume what cannot be resumed
 */
export function supervisorCommand(
  message: MountMessage,
  engine: EngineCommand,
  ctx: SupervisorContext,
): SupervisorCommand {
  const session = message.session;
  const resumable = session !== undefined && engine.engine === "mount-s3" &&
    ctx.sessionDir !== undefined;
  if (session?.resume && !resumable) {
    throw new SessionError(
      engine.engine !== "mount-s3"
        ? `The node plugin asked to resume a session of ${engine.engine}, which cannot resume one`
        : "The node plugin asked to resume a session, but this Mountpoint Pod has no work volume to keep it in",
    );
  }
  const engineArgs = resumable
    ? [...engine.args, `--session-dir=${ctx.sessionDir}`, `--session-id=${session!.id}`]
    : engine.args;
  const argv = [
    ctx.program,
    `--comm-dir=${ctx.commDir}`,
    `--fuse-fd=${ctx.fd}`,
    `--drain-grace-ms=${ctx.drainGraceMs}`,
    ...(resumable ? ["--resumable", `--session-id=${session!.id}`] : []),
    ...(resumable && session!.resume ? ["--resume"] : []),
    "--",
    engine.command,
    ...engineArgs,
  ];
  return { program: ctx.program, argv, env: engine.env, resumable };
}
