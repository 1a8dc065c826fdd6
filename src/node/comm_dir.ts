/**
 * The node plugin's side of a Mountpoint Pod's comm dir, which the pod (untrusted, uid 1000) owns
 * and writes too. Everything goes through a {@link DirHandle} (`sys/dir_handle.ts`): no link is
 * followed, only regular files are read and only a few KiB of them, nothing blocks.
 *
 * Also here: turning the mounter's report (`mount.error`, written by the pod) into a short,
 * single-line message for the workload's Events — the full text goes to the node plugin's log.
 *
 * @module
 */
import { hostCommDir, MOUNT_ERROR, MOUNT_EXIT } from "../mppod/paths.ts";
import { type DirHandle, type Files, UnsafeEntryError } from "../sys/files.ts";
import { redactUrlCredentials } from "../util/redact.ts";

/** Bytes of `mount.error` read (its end: the engine's last words). */
export const MOUNT_ERROR_READ_BYTES = 4096;
/**
 * Longest engine message put in a CSI error (and so in an Event, whose message Kubernetes keeps up
 * to 1 KiB): room for mount-s3's one-line error with its hint (e.g. which CA bundle a failed TLS
 * handshake needs).
 */
export const SHORT_MESSAGE_CHARS = 400;

/** AWS access key ids (`AKIA…` long-term, `ASIA…` temporary, …): 20 characters, a known prefix. */
const AWS_KEY_ID_REGEXP =
  /\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}\b/g;

/** Open the comm dir of the pod with UID `podUID`; undefined when it does not exist. */
export function openCommDir(
  files: Files,
  kubeletRoot: string,
  podUID: string,
): Promise<DirHandle | undefined> {
  return files.openDir(hostCommDir(kubeletRoot, podUID));
}

/**
 * What the mounter reported in `mount.error` (its last {@link MOUNT_ERROR_READ_BYTES} bytes,
 * trimmed), undefined when there is no report. Anything but a regular file there is itself the
 * report: the pod tampered with its comm dir.
 */
export async function readMountError(comm: DirHandle): Promise<string | undefined> {
  try {
    const text = await comm.readFile(MOUNT_ERROR, { maxBytes: MOUNT_ERROR_READ_BYTES, tail: true });
    return text?.trim() || undefined;
  } catch (err) {
    if (err instanceof UnsafeEntryError) return err.message;
    throw err;
  }
}

/** Ask the mounter to exit 0 when its engine ends (`mount.exit`). */
export async function requestExit(comm: DirHandle): Promise<void> {
  await comm.writeFile(MOUNT_EXIT, "", { mode: 0o644 });
}

/**
 * The mounter's report for the node plugin's log: complete (it was read bounded), with runs of
 * control characters (a file of NULs, terminal escapes) collapsed to one `�`.
 */
export function reportForLog(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f]+/g, "\ufffd");
}

/**
 * A short message for the workload's Events: the first line of `text` (the mounter's summary) and
 * its last (the engine's last words), without control characters or terminal escapes, at most
 * {@link SHORT_MESSAGE_CHARS} characters (a longer one loses its middle: engines end their
 * errors with the cause and the hint); `secrets` (e.g. the access key id), anything shaped like an
 * AWS access key id and the user and password of URLs (a proxy's) become `<redacted>`.
 */
export function shortMessage(text: string, secrets: readonly string[] = []): string {
  let clean = redactUrlCredentials(text).replace(AWS_KEY_ID_REGEXP, "<redacted>")
    // deno-lint-ignore no-control-regex
    .replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "")
    // deno-lint-ignore no-control-regex
    .replace(/[\x00-\x08\x0b-\x1f\x7f]/g, " ");
  for (const s of secrets) if (s) clean = clean.split(s).join("<redacted>");
  const lines = clean.split("\n").map((l) => l.replace(/\s+/g, " ").trim()).filter(Boolean);
  const first = lines[0] ?? "";
  const last = lines.at(-1) ?? "";
  const joined = lines.length > 1 ? `${cut(first, 80)} … ${last}` : first;
  if (joined.length <= SHORT_MESSAGE_CHARS) return joined;
  const head = Math.floor(SHORT_MESSAGE_CHARS / 3);
  return `${joined.slice(0, head)}…${
    joined.slice(joined.length - (SHORT_MESSAGE_CHARS - head - 1))
  }`;
}

function cut(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
