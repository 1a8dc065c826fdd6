/**
 * `/proc/self/mountinfo`: a pure parser ({@link parseMountInfo}), a reader ({@link readMountInfo})
 * and lookups over the parsed table. The node plugin uses them to decide whether a target is
 * already mounted and how many bind mounts still reference a FUSE source mount.
 *
 * Line format (proc(5)), one mount per line:
 * `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`:
 * mount id, parent id, major:minor, root, mount point, mount options, zero or more optional
 * fields, a `-` separator, file-system type, source and super options. The kernel escapes space,
 * tab, newline and backslash as octal (`\040`, `\011`, `\012`, `\134`).
 *
 * @module
 */

/** One line of mountinfo. Strings are unescaped. */
export interface MountInfo {
  /** Unique id of the mount. */
  readonly mountId: number;
  /** Id of the parent mount (itself for the root of the mount namespace). */
  readonly parentId: number;
  /** `st_dev` of files on this mount, as `"major:minor"`; bind mounts share it with their source. */
  readonly majorMinor: string;
  /** Device major number. */
  readonly major: number;
  /** Device minor number; for FUSE it names the connection in `/sys/fs/fuse/connections/`. */
  readonly minor: number;
  /** Directory of the file system that forms the root of this mount (`/` unless a sub-bind). */
  readonly root: string;
  /** Mount point, relative to the process root. */
  readonly mountPoint: string;
  /** Per-mount options, e.g. `["ro", "nosuid", "nodev", "noatime"]`. */
  readonly mountOptions: readonly string[];
  /** Optional fields such as `shared:1` or `master:2`. */
  readonly optionalFields: readonly string[];
  /** File-system type, e.g. `"fuse"`, `"fuse.rclone"`, `"tmpfs"`. */
  readonly fsType: string;
  /** Mount source (the device or `fsname`), e.g. `"mountpoint-s3"`. */
  readonly source: string;
  /** Per-superblock options, e.g. `["rw", "user_id=0", "group_id=0"]`. */
  readonly superOptions: readonly string[];
}

/** A line that does not follow the mountinfo format. */
export class MountInfoParseError extends Error {
  override name = "MountInfoParseError";
}

/** Where the kernel publishes the calling process's mount table. */
export const MOUNTINFO_PATH = "/proc/self/mountinfo";

const ESCAPE_REGEXP = /\\([0-7]{3})/g;
const MAJOR_MINOR_REGEXP = /^(\d+):(\d+)$/;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Undo the kernel's octal escapes (`\040` → space), decoding the resulting bytes as UTF-8. */
export function unescapeMountField(field: string): string {
  if (!field.includes("\\")) return field;
  const bytes: number[] = [];
  let last = 0;
  for (const m of field.matchAll(ESCAPE_REGEXP)) {
    bytes.push(...encoder.encode(field.slice(last, m.index)), parseInt(m[1]!, 8));
    last = m.index + m[0].length;
  }
  bytes.push(...encoder.encode(field.slice(last)));
  return decoder.decode(new Uint8Array(bytes));
}

/** Parse one mountinfo line. @throws {MountInfoParseError} when it is malformed */
export function parseMountInfoLine(line: string): MountInfo {
  const fields = line.trim().split(" ");
  const sep = fields.indexOf("-", 6);
  const mm = MAJOR_MINOR_REGEXP.exec(fields[2] ?? "");
  if (sep < 0 || sep + 2 >= fields.length || !mm) {
    throw new MountInfoParseError(`Malformed mountinfo line: "${line.slice(0, 200)}"`);
  }
  const mountId = Number(fields[0]);
  const parentId = Number(fields[1]);
  if (!Number.isInteger(mountId) || !Number.isInteger(parentId) || fields[0] === "") {
    throw new MountInfoParseError(`Malformed mountinfo line: "${line.slice(0, 200)}"`);
  }
  return {
    mountId,
    parentId,
    majorMinor: fields[2]!,
    major: Number(mm[1]),
    minor: Number(mm[2]),
    root: unescapeMountField(fields[3]!),
    mountPoint: unescapeMountField(fields[4]!),
    mountOptions: fields[5]!.split(","),
    optionalFields: fields.slice(6, sep),
    fsType: unescapeMountField(fields[sep + 1]!),
    source: unescapeMountField(fields[sep + 2]!),
    superOptions: (fields[sep + 3] ?? "").split(",").filter((o) => o !== "").map(
      unescapeMountField,
    ),
  };
}

/** Parse a whole mountinfo text; blank lines are skipped. @throws {MountInfoParseError} */
export function parseMountInfo(text: string): MountInfo[] {
  return text.split("\n").filter((l) => l.trim() !== "").map(parseMountInfoLine);
}

/** Options of {@link readMountInfo}. */
export interface ReadMountInfoOptions {
  /** File to read. @default {@link MOUNTINFO_PATH} */
  readonly path?: string;
}

/**
 * Read and parse the live mount table. Needs `--allow-all` (Deno guards `/proc` that way).
 * @throws {MountInfoParseError} on a malformed line
 */
export async function readMountInfo(options: ReadMountInfoOptions = {}): Promise<MountInfo[]> {
  return parseMountInfo(await Deno.readTextFile(options.path ?? MOUNTINFO_PATH));
}

/** `path` without repeated or trailing slashes, as the kernel prints mount points. */
export function normalizeMountPath(path: string): string {
  const p = path.replace(/\/+/g, "/");
  return p.length > 1 ? p.replace(/\/$/, "") : p;
}

/**
 * The mount whose mount point is exactly `path`; when several are stacked there, the last one
 * (the visible one). Symlinks are not resolved: pass a canonical path.
 */
export function findMount(mounts: readonly MountInfo[], path: string): MountInfo | undefined {
  const p = normalizeMountPath(path);
  return mounts.findLast((m) => m.mountPoint === p);
}

/** True when something is mounted exactly at `path` (see {@link findMount}). */
export function isMountPoint(mounts: readonly MountInfo[], path: string): boolean {
  return findMount(mounts, path) !== undefined;
}

/** The mount that contains `path`: the visible mount with the longest mount-point prefix. */
export function mountContaining(mounts: readonly MountInfo[], path: string): MountInfo | undefined {
  const p = normalizeMountPath(path);
  let best: MountInfo | undefined;
  for (const m of mounts) {
    const inside = m.mountPoint === "/" || p === m.mountPoint || p.startsWith(`${m.mountPoint}/`);
    if (inside && (best === undefined || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  return best;
}

/**
 * Every mount of the same file system and subtree: same `majorMinor` and same `root`. For a FUSE
 * source mount this is the source itself plus every bind mount made from it.
 */
export function mountsOfSource(
  mounts: readonly MountInfo[],
  source: { readonly majorMinor: string; readonly root: string },
): MountInfo[] {
  return mounts.filter((m) => m.majorMinor === source.majorMinor && m.root === source.root);
}

/**
 * The other mount points that show the same file system and subtree as the mount containing
 * `path` (upstream's `GetMountRefs`). Empty when nothing else references it.
 */
export function mountRefs(mounts: readonly MountInfo[], path: string): string[] {
  const own = mountContaining(mounts, path);
  if (own === undefined) return [];
  return mountsOfSource(mounts, own).map((m) => m.mountPoint).filter((p) => p !== own.mountPoint);
}
