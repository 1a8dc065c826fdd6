/**
 * The message the node plugin sends to the mounter over {@link MOUNT_SOCK}: one `sendmsg` carrying
 * this JSON as payload and exactly one FUSE fd as `SCM_RIGHTS`; the sender then closes the
 * connection and the receiver reads to EOF. Field names match the upstream wire format
 * (`bucketName`, `args`, `env`, `volumeId`) so either side can talk to an upstream peer.
 *
 * Writer: node plugin. Reader: mounter, which validates it with {@link parseMountMessage}.
 *
 * @module
 */

import { OUR_PROTOCOLS, type ProtocolRange } from "./mount_protocol.ts";

/** Largest accepted message (payload bytes). A bigger message is refused, not truncated. */
export const MAX_MOUNT_MESSAGE_BYTES = 64 * 1024;

/** FUSE engines the mounter can run. */
export const ENGINES = ["mount-s3", "rclone"] as const;
/** A FUSE engine name. */
export type Engine = typeof ENGINES[number];
/**
 * The engine of a volume that names none (volume attribute or StorageClass parameter `engine`):
 * our `mount-s3`. The node plugin's `--default-engine` may choose `rclone` for a whole node.
 */
export const DEFAULT_ENGINE: Engine = "mount-s3";

/** The engine session a message belongs to (protocol 2). */
export interface MountSession {
  /** The node plugin's id of the FUSE connection (32 hex digits), the same in every message of it. */
  readonly id: string;
  /**
   * True when the connection was already served (the Mountpoint container restarted and the node
   * plugin sends the same fd again): the engine resumes the session instead of starting one.
   */
  readonly resume: boolean;
}

/** Options + environment for one FUSE session. */
export interface MountMessage {
  /** Wire format version; absent means 1. */
  readonly protocolVersion?: number;
  /** Bucket to mount. */
  readonly bucketName: string;
  /** mount-s3 style options, each `--name` or `--name=value`, sorted. */
  readonly args: readonly string[];
  /** The engine's entire environment as `KEY=VALUE` strings (nothing is inherited). */
  readonly env: readonly string[];
  /** Volume handle, for logs and errors. */
  readonly volumeId?: string;
  /** Engine requested for this volume; the mounter's default when absent. */
  readonly engine?: Engine;
  /** Protocol 2: the session, so the engine can outlive its process. */
  readonly session?: MountSession;
}

/** The protocol version of `message` (1 when it names none). */
export function protocolOf(message: MountMessage): number {
  return message.protocolVersion ?? 1;
}

/** A malformed or oversized mount message. */
export class MountMessageError extends Error {
  override name = "MountMessageError";
}

const ARG_REGEXP = /^--[a-z0-9][a-z0-9-]*(=[^\0\n]*)?$/;

/**
 * Why the mounter would refuse `arg` in a message's `args`, or undefined. The node plugin checks
 * the arguments it renders with this before anything is mounted, so no option can pass the node's
 * validation and then be refused by the mounter once the FUSE mount exists.
 */
export function mountArgProblem(arg: string): string | undefined {
  return ARG_REGEXP.test(arg)
    ? undefined
    : `${
      JSON.stringify(arg).slice(0, 80)
    } is not an option the mounter accepts (--name or --name=value without NUL or newline)`;
}
const ENV_REGEXP = /^[A-Za-z_][A-Za-z0-9_]*=[^\0]*$/;
const SESSION_ID_REGEXP = /^[0-9a-f]{32}$/;
const BUCKET_REGEXP = /^[A-Za-z0-9][A-Za-z0-9._:-]{1,254}$/;

/** Serialise a message for the wire. */
export function encodeMountMessage(message: MountMessage): Uint8Array {
  const bytes = new TextEncoder().encode(JSON.stringify(message));
  if (bytes.length > MAX_MOUNT_MESSAGE_BYTES) {
    throw new MountMessageError(
      `Mount message is ${bytes.length} bytes, more than the ${MAX_MOUNT_MESSAGE_BYTES} allowed`,
    );
  }
  return bytes;
}

function stringArray(value: unknown, field: string, pattern: RegExp): string[] {
  if (!Array.isArray(value)) {
    throw new MountMessageError(`Mount message field "${field}" must be an array of strings`);
  }
  return value.map((v, i) => {
    if (typeof v !== "string" || !pattern.test(v)) {
      throw new MountMessageError(
        `Mount message field "${field}[${i}]" is malformed: ${JSON.stringify(v)?.slice(0, 80)}`,
      );
    }
    return v;
  });
}

/**
 * Decode and validate a received payload, as a mounter speaking `speaks` (this build's protocols;
 * tests pass another release's range).
 * @throws {MountMessageError} when it is too big, not JSON, of a protocol outside `speaks`, or a
 * field is missing or malformed.
 */
export function parseMountMessage(
  bytes: Uint8Array,
  speaks: ProtocolRange = OUR_PROTOCOLS,
): MountMessage {
  if (bytes.length > MAX_MOUNT_MESSAGE_BYTES) {
    throw new MountMessageError(`Mount message is larger than ${MAX_MOUNT_MESSAGE_BYTES} bytes`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new MountMessageError("Mount message is not valid UTF-8 JSON", { cause: err });
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new MountMessageError("Mount message must be a JSON object");
  }
  const o = raw as Record<string, unknown>;
  const version = o.protocolVersion ?? 1;
  if (typeof version !== "number" || !Number.isInteger(version) || version < 1) {
    throw new MountMessageError(`Mount message field "protocolVersion" must be a positive integer`);
  }
  if (version > speaks.max || version < speaks.min) {
    throw new MountMessageError(
      `Mount message protocol ${version} is not supported by this mounter (it speaks ${speaks.min} to ${speaks.max}): the node plugin and the Mountpoint Pod image are too far apart in version; see the README's skew policy`,
    );
  }
  const known = new Set(["bucketName", "args", "env", "volumeId", "engine"]);
  if (version >= 2) known.add("protocolVersion").add("session");
  const unknown = Object.keys(o).filter((k) => !known.has(k));
  if (unknown.length) {
    throw new MountMessageError(`Mount message has unknown fields: ${unknown.join(", ")}`);
  }
  if (typeof o.bucketName !== "string" || !BUCKET_REGEXP.test(o.bucketName)) {
    throw new MountMessageError(
      `Mount message field "bucketName" is missing or not a valid bucket name`,
    );
  }
  const message: { -readonly [K in keyof MountMessage]: MountMessage[K] } = {
    bucketName: o.bucketName,
    args: stringArray(o.args, "args", ARG_REGEXP),
    env: stringArray(o.env, "env", ENV_REGEXP),
  };
  if (o.volumeId !== undefined) {
    if (typeof o.volumeId !== "string") {
      throw new MountMessageError(`Mount message field "volumeId" must be a string`);
    }
    message.volumeId = o.volumeId;
  }
  if (o.engine !== undefined) {
    if (!ENGINES.includes(o.engine as Engine)) {
      throw new MountMessageError(
        `Mount message field "engine" must be one of ${ENGINES.join(", ")}`,
      );
    }
    message.engine = o.engine as Engine;
  }
  if (version >= 2) message.protocolVersion = version;
  if (o.session !== undefined) {
    const session = o.session as Record<string, unknown> | null;
    if (
      session === null || typeof session !== "object" || Array.isArray(session) ||
      typeof session.id !== "string" || !SESSION_ID_REGEXP.test(session.id) ||
      typeof session.resume !== "boolean" ||
      Object.keys(session).some((k) => k !== "id" && k !== "resume")
    ) {
      throw new MountMessageError(
        `Mount message field "session" must be {"id": 32 hex digits, "resume": true|false}`,
      );
    }
    message.session = { id: session.id, resume: session.resume };
  }
  return message;
}
