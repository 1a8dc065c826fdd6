/**
 * What the FUSE device is: the character device 10:229 (`crw------- 10, 229 /dev/fuse`, the misc
 * device "fuse"). Fds are judged by that, never by the path `/proc/self/fd/<fd>` shows: that path
 * depends on the reader's root (a process in a container or chroot sees the host's `/dev/fuse`
 * under another name, or none).
 *
 * @module
 */

export const FUSE_DEVICE_MAJOR = 10;
export const FUSE_DEVICE_MINOR = 229;

/**
 * Linux's `dev_t` split as glibc's `major()`/`minor()` do: major in bits 8–19 and 44–63, minor in
 * bits 0–7 and 20–43. (`>>>` sees only the low 32 bits, so the high part is divided off.)
 */
export function deviceNumbers(rdev: number): { major: number; minor: number } {
  const low = rdev % 2 ** 32;
  const high = Math.floor(rdev / 2 ** 32);
  return {
    major: ((low >>> 8) & 0xfff) + (high - (high & 0xfff)),
    minor: ((low & 0xff) | ((low >>> 12) & 0xfff00)) + (high & 0xfff) * 2 ** 20,
  };
}

/** True when `st` (a stat of a file or of a `/proc/<pid>/fd/<n>` link) is the FUSE device. */
export function isFuseDeviceFile(st: Pick<Deno.FileInfo, "isCharDevice" | "rdev">): boolean {
  if (!st.isCharDevice || st.rdev === null) return false;
  const { major, minor } = deviceNumbers(st.rdev);
  return major === FUSE_DEVICE_MAJOR && minor === FUSE_DEVICE_MINOR;
}
