/**
 * The command line and environment of the FUSE engine for one mount message, serving the
 * already-mounted FUSE connection given as `/dev/fd/<fd>`:
 *
 * - `mount-s3 <bucket> /dev/fd/N --foreground <args>` with the message's environment, plus
 *   `AWS_CA_BUNDLE` when the pod has a custom CA; `--cache` points at the pod's cache volume;
 * - `rclone mount2 s3:<bucket>[/<prefix>] /dev/fd/N …` (Debian's rclone; its `mount2` accepts
 *   `/dev/fd/N`) with the mount-s3 options **translated**; the S3 remote is configured only by
 *   `RCLONE_CONFIG_S3_*` variables; credentials come from the AWS environment (profile files).
 *   An option rclone cannot honour is an {@link EngineOptionError} naming it, never ignored
 *   (`engine_support.ts`: a writable volume must allow deletes and overwrites). Sizes are given
 *   with a unit (rclone reads a bare number as KiB); its cache lives in the cache volume, or in
 *   the work dir — never in the comm dir.
 *
 * Pure: unit-tested without permissions.
 *
 * @module
 */
import type { Engine, MountMessage } from "../mppod/mount_message.ts";
import { COMM_DIR } from "../mppod/paths.ts";
import { engineOptionsProblem, parseEngineArgs, rcloneSize } from "../mppod/engine_support.ts";
import { ENGINE_METRICS_LABELS_ENV, ENGINE_METRICS_PORT_ENV } from "../mppod/engine_metrics.ts";

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
  /** A private writable directory for the engine's HOME (and rclone's files without a cache). */
  readonly workDir: string;
  /** The pod's cache volume, when it has one: where `--cache` goes. */
  readonly cacheDir?: string | undefined;
  /** The pod's custom CA bundle (PEM), when it has one. */
  readonly caBundle?: string | undefined;
  /** Path of the program (from PATH lookup). */
  readonly program: string;
  /** mount-s3's Prometheus endpoint (port 0: none) and labels (JSON), from the pod. */
  readonly metrics?: { readonly port: number; readonly labels: string } | undefined;
}

const parseArgs = parseEngineArgs;

function noCacheVolume(): EngineOptionError {
  return new EngineOptionError(
    "The volume asks for a local cache but this Mountpoint Pod has no cache volume (MOUNTER_CACHE_DIR is not set): the controller that made it does not know local caches; run the controller of the node plugin's version",
  );
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

/** Build the mount-s3 command. @throws {EngineOptionError} */
export function mountS3Command(msg: MountMessage, fd: number, ctx: EngineContext): EngineCommand {
  const options = parseArgs(msg.args);
  const args = [msg.bucketName, `/dev/fd/${fd}`, "--foreground"];
  for (const [k, v] of [...options].sort(([a], [b]) => a.localeCompare(b))) {
    if (k === "cache") {
      // Whatever path the message names: the cache goes to the pod's cache volume, never to the
      // comm dir or the work dir.
      if (!ctx.cacheDir) throw noCacheVolume();
      args.push(`--cache=${ctx.cacheDir}`);
    } else args.push(v === true ? `--${k}` : `--${k}=${v}`);
  }
  const env = envRecord(msg.env, ctx.commDir);
  if (ctx.caBundle && env.AWS_CA_BUNDLE === undefined) env.AWS_CA_BUNDLE = ctx.caBundle;
  if (ctx.metrics && ctx.metrics.port > 0) {
    env[ENGINE_METRICS_PORT_ENV] = String(ctx.metrics.port);
    if (ctx.metrics.labels) env[ENGINE_METRICS_LABELS_ENV] = ctx.metrics.labels;
  }
  return {
    engine: "mount-s3",
    command: ctx.program,
    args,
    env: { HOME: ctx.workDir, ...env },
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
  const problem = engineOptionsProblem("rclone", options);
  if (problem) throw new EngineOptionError(problem);
  if (options.has("cache") && !ctx.cacheDir) throw noCacheVolume();
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
      case "allow-delete":
      case "allow-overwrite":
        break; // required (engine_support.ts): rclone always allows both
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
        flags.push(`--vfs-cache-max-size=${value}M`); // MiB, as mount-s3's
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
        // Bytes; rclone reads a bare number as KiB (8388608 would be 8 GiB chunks).
        if (k === "write-part-size" || !options.has("write-part-size")) {
          rc.CHUNK_SIZE = rcloneSize(Number(value));
        }
        if (k === "part-size" && !options.has("read-part-size")) {
          flags.push(`--vfs-read-chunk-size=${rcloneSize(Number(value))}`);
        }
        break;
      case "read-part-size":
        flags.push(`--vfs-read-chunk-size=${rcloneSize(Number(value))}`);
        break;
      case "upload-checksums":
        rc.DISABLE_CHECKSUM = "true"; // only "off" passes engineOptionsProblem
        break;
      case "user-agent-prefix":
        flags.push(`--user-agent=${value}`);
        break;
      case "requester-pays":
        rc.REQUESTER_PAYS = "true";
        break;
      case "no-sign-request":
        // No keys and no environment credentials: rclone then sends anonymous requests.
        rc.ENV_AUTH = "false";
        break;
      case "infer-content-type":
        break; // rclone always sets the Content-Type of uploads from the file extension
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
  // rclone keeps files in its cache dir even without --vfs-cache-mode: the cache volume when the
  // pod has one (the volume asked for a cache), else the private work dir; never the comm dir.
  flags.push(
    "--async-read=false",
    `--cache-dir=${ctx.cacheDir && options.has("cache") ? ctx.cacheDir : ctx.workDir}/rclone-cache`,
    `--log-level=${logLevel}`,
  );
  // rclone's HTTP client refuses the AWS_CA_BUNDLE variable but takes the file as --ca-cert.
  const ca = env.AWS_CA_BUNDLE || ctx.caBundle;
  if (ca) flags.push(`--ca-cert=${ca}`);
  const out: Record<string, string> = { HOME: ctx.workDir };
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith("AWS_") || /^(https?|no)_proxy$/i.test(k)) out[k] = v;
  }
  delete out.AWS_CA_BUNDLE;
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
