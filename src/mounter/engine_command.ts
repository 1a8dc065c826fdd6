/**
 * The command line and environment of the FUSE engine for one mount message, serving the
 * already-mounted FUSE connection given as `/dev/fd/<fd>`:
 *
 * - `mount-s3 <bucket> /dev/fd/N --foreground <args>` with the message's environment;
 * - `rclone mount2 s3:<bucket>[/<prefix>] /dev/fd/N …` (Debian's rclone; its `mount2` accepts
 *   `/dev/fd/N`) with the mount-s3 options **translated**; the S3 remote is configured only by
 *   `RCLONE_CONFIG_S3_*` variables; credentials come from the AWS environment (profile files).
 *   An option rclone cannot honour is an {@link EngineOptionError} naming it, never ignored.
 *
 * Pure: unit-tested without permissions.
 *
 * @module
 */
import type { Engine, MountMessage } from "../mppod/mount_message.ts";
import { COMM_DIR } from "../mppod/paths.ts";

/** An option or setting the engine cannot honour. */
export class EngineOptionError extends Error {
  override name = "EngineOptionError";
}

/** A ready-to-run engine command. */
export interface EngineCommand {
  readonly engine: Engine;
  readonly command: string;
  readonly args: string[];
  /** The engine's complete environment. */
  readonly env: Record<string, string>;
}

/** Context of the mounter. */
export interface EngineContext {
  /** The mounter's comm dir (env paths under `/comm` are rewritten to it). */
  readonly commDir: string;
  /** A private writable directory for engine caches and HOME. */
  readonly workDir: string;
  /** Path of the program (from PATH lookup). */
  readonly program: string;
}

function parseArgs(args: readonly string[]): Map<string, string | true> {
  const out = new Map<string, string | true>();
  for (const a of args) {
    const body = a.replace(/^--/, "");
    const eq = body.indexOf("=");
    out.set(eq < 0 ? body : body.slice(0, eq), eq < 0 ? true : body.slice(eq + 1));
  }
  return out;
}

/** `KEY=VALUE` list → record, rewriting `/comm/...` values to the real comm dir. */
function envRecord(env: readonly string[], commDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of env) {
    const i = e.indexOf("=");
    let v = e.slice(i + 1);
    if (commDir !== COMM_DIR && (v === COMM_DIR || v.startsWith(`${COMM_DIR}/`))) {
      v = commDir + v.slice(COMM_DIR.length);
    }
    out[e.slice(0, i)] = v;
  }
  return out;
}

/** Build the mount-s3 command. */
export function mountS3Command(msg: MountMessage, fd: number, ctx: EngineContext): EngineCommand {
  const options = parseArgs(msg.args);
  const args = [msg.bucketName, `/dev/fd/${fd}`, "--foreground"];
  for (const [k, v] of [...options].sort(([a], [b]) => a.localeCompare(b))) {
    if (k === "cache") args.push(`--cache=${ctx.workDir}/cache`);
    else args.push(v === true ? `--${k}` : `--${k}=${v}`);
  }
  return {
    engine: "mount-s3",
    command: ctx.program,
    args,
    env: { HOME: ctx.workDir, ...envRecord(msg.env, ctx.commDir) },
  };
}

function seconds(ttl: string): string {
  if (ttl === "indefinite") return "8760h";
  if (ttl === "minimal") return "1s";
  return `${ttl}s`;
}

/** Build the rclone mount2 command. @throws {EngineOptionError} */
export function rcloneCommand(msg: MountMessage, fd: number, ctx: EngineContext): EngineCommand {
  const options = parseArgs(msg.args);
  const env = envRecord(msg.env, ctx.commDir);
  const rc: Record<string, string> = {
    TYPE: "s3",
    PROVIDER: "Other",
    ENV_AUTH: "true",
    NO_CHECK_BUCKET: "true",
    FORCE_PATH_STYLE: "false",
  };
  if (env.AWS_ENDPOINT_URL) rc.ENDPOINT = env.AWS_ENDPOINT_URL;
  if (env.AWS_REGION) rc.REGION = env.AWS_REGION;
  const flags: string[] = [];
  let logLevel = "NOTICE";
  let remotePath = msg.bucketName;
  let modes = false;
  for (const [k, v] of options) {
    const value = String(v);
    switch (k) {
      case "read-only":
        flags.push("--read-only");
        break;
      case "allow-other":
        flags.push("--allow-other");
        break;
      case "allow-root":
        flags.push("--allow-root");
        break;
      case "allow-delete":
      case "allow-overwrite":
        break; // rclone always allows deletes and overwrites of whole files
      case "uid":
      case "gid":
        flags.push(`--${k}=${value}`);
        break;
      case "dir-mode":
        flags.push(`--dir-perms=${value.padStart(4, "0")}`);
        modes = true;
        break;
      case "file-mode":
        flags.push(`--file-perms=${value.padStart(4, "0")}`);
        modes = true;
        break;
      case "prefix":
        remotePath = `${msg.bucketName}/${value.replace(/\/+$/, "")}`;
        break;
      case "region":
        rc.REGION = value;
        break;
      case "force-path-style":
        rc.FORCE_PATH_STYLE = "true";
        break;
      case "metadata-ttl":
        flags.push(`--dir-cache-time=${seconds(value)}`, `--attr-timeout=${seconds(value)}`);
        break;
      case "cache":
        flags.push("--vfs-cache-mode=full");
        break;
      case "max-cache-size":
        flags.push(`--vfs-cache-max-size=${value}M`);
        break;
      case "storage-class":
        rc.STORAGE_CLASS = value;
        break;
      case "sse":
        rc.SERVER_SIDE_ENCRYPTION = value;
        break;
      case "sse-kms-key-id":
        rc.SSE_KMS_KEY_ID = value;
        break;
      case "debug":
      case "debug-crt":
        logLevel = "DEBUG";
        break;
      case "no-log":
        logLevel = "ERROR";
        break;
      case "max-threads":
        rc.UPLOAD_CONCURRENCY = value;
        break;
      case "part-size":
      case "write-part-size":
        rc.CHUNK_SIZE = value;
        break;
      case "read-part-size":
        flags.push(`--vfs-read-chunk-size=${value}`);
        break;
      case "upload-checksums":
        if (value !== "off") {
          throw new EngineOptionError(
            `Option "--upload-checksums=${value}" cannot be translated for rclone (only "off" can)`,
          );
        }
        rc.DISABLE_CHECKSUM = "true";
        break;
      case "user-agent-prefix":
        flags.push(`--user-agent=${value}`);
        break;
      default:
        throw new EngineOptionError(
          `Option "--${k}${
            v === true ? "" : `=${value}`
          }" cannot be translated for rclone; remove it from the volume's mountOptions or use the mount-s3 engine`,
        );
    }
  }
  if (modes) flags.push("--umask=0");
  // Synchronous reads keep rclone's VFS reader in sequence: with async reads the kernel's
  // read-ahead requests arrive out of order and rclone re-opens the object (measured: throughput
  // collapses from ~200 to ~10 MB/s at random).
  flags.push(
    "--async-read=false",
    `--cache-dir=${ctx.workDir}/rclone-cache`,
    `--log-level=${logLevel}`,
  );
  const out: Record<string, string> = { HOME: ctx.workDir };
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith("AWS_") || k === "HTTPS_PROXY" || k === "NO_PROXY") out[k] = v;
  }
  delete out.AWS_CA_BUNDLE; // rclone's HTTP client refuses a custom CA bundle variable
  for (const [k, v] of Object.entries(rc)) out[`RCLONE_CONFIG_S3_${k}`] = v;
  return {
    engine: "rclone",
    command: ctx.program,
    args: ["mount2", `s3:${remotePath}`, `/dev/fd/${fd}`, "--config", "/dev/null", ...flags],
    env: out,
  };
}

/** Build the command for `engine`. @throws {EngineOptionError} */
export function engineCommand(
  engine: Engine,
  msg: MountMessage,
  fd: number,
  ctx: EngineContext,
): EngineCommand {
  return engine === "mount-s3" ? mountS3Command(msg, fd, ctx) : rcloneCommand(msg, fd, ctx);
}
