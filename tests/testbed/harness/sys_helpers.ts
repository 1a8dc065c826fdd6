/**
 * Helpers for the privileged `sys/` tests: skip reasons, temporary directories whose mounts are
 * always cleaned up, and an rclone FUSE engine started on a pre-mounted `/dev/fd/N`.
 *
 * @module
 */
import { testOrSkip } from "../../_helpers.ts";
import { TimeoutError } from "../../../src/util/errors.ts";
import { clearCloexec, closeFd, mountFuse, openFuse, unmount } from "../../../src/sys/mount.ts";
import { normalizeMountPath, readMountInfo } from "../../../src/sys/mountinfo.ts";

function commandExists(name: string): boolean {
  try {
    return new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null" })
      .outputSync()
      .success;
  } catch {
    return false;
  }
}

/** Why privileged tests cannot run here, or undefined when they can. */
export function rootSkipReason(): string | undefined {
  if (Deno.uid() !== 0) return "needs root";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  return undefined;
}

/** Why the rclone tests cannot run here, or undefined when they can. */
export function rcloneSkipReason(): string | undefined {
  return rootSkipReason() ??
    (commandExists("rclone") ? undefined : "needs rclone (apt-get install rclone)");
}

/** Why the wrong-uid test cannot run here, or undefined when it can. */
export function setprivSkipReason(): string | undefined {
  return rootSkipReason() ?? (commandExists("setpriv") ? undefined : "needs setpriv (util-linux)");
}

/** `Deno.test` that is ignored, with the reason in its name, when `reason` is set. */
export function privilegedTest(
  name: string,
  reason: string | undefined,
  fn: (t: Deno.TestContext) => Promise<void>,
): void {
  testOrSkip(reason, {
    name,
    sanitizeResources: false, // FFI fds and child processes are tracked by hand
    fn,
  });
}

/** Lazily unmount everything mounted at or below `dir`, deepest first. Never throws. */
export async function unmountAllUnder(dir: string): Promise<number> {
  const root = normalizeMountPath(dir);
  let count = 0;
  for (let round = 0; round < 5; round++) {
    const mine = (await readMountInfo()).filter((m) =>
      m.mountPoint === root || m.mountPoint.startsWith(`${root}/`)
    );
    if (mine.length === 0) break;
    for (const m of mine.reverse()) {
      try {
        if (unmount(m.mountPoint, { detach: true }) === "unmounted") count++;
      } catch {
        // keep going; the next round retries
      }
    }
  }
  return count;
}

/** A temporary directory (mode 0755) removed with all its mounts when disposed. */
export async function tempDir(prefix: string): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix: `s3csi-sys-${prefix}-` });
  await Deno.chmod(path, 0o755);
  return {
    path,
    async [Symbol.asyncDispose]() {
      await unmountAllUnder(path);
      await Deno.remove(path, { recursive: true }).catch(() => {});
    },
  };
}

/** Resolve with the child's status, or kill it and throw after `ms`. */
export async function statusWithin(
  child: Deno.ChildProcess,
  ms: number,
): Promise<Deno.CommandStatus> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      child.status,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          try {
            child.kill("SIGKILL");
          } catch { /* already gone */ }
          reject(new TimeoutError(`child ${child.pid} to exit`, ms));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** An rclone `mount2` engine serving `dataDir` on a FUSE mount made by us at `mountPoint`. */
export interface RcloneMount extends AsyncDisposable {
  /** The engine process. */
  readonly child: Deno.ChildProcess;
  /** Milliseconds spent in open + mount + spawn. */
  readonly mountMs: number;
}

/**
 * The node-plugin flow in one process: open /dev/fuse, mount it at `mountPoint` with our flags,
 * hand the fd to `rclone mount2 <dataDir> /dev/fd/N` and close our copy. Disposing unmounts
 * (lazily) and waits for rclone to exit.
 */
export function startRclone(
  dataDir: string,
  mountPoint: string,
  options: { readOnly?: boolean } = {},
): RcloneMount {
  const t0 = performance.now();
  const fd = openFuse();
  let child: Deno.ChildProcess;
  try {
    mountFuse(mountPoint, { fd, allowOther: true, readOnly: options.readOnly ?? false });
    clearCloexec(fd);
    child = new Deno.Command("rclone", {
      args: ["mount2", dataDir, `/dev/fd/${fd}`, "--config", "/dev/null", "--log-level", "ERROR"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
  } catch (err) {
    unmount(mountPoint, { detach: true });
    throw err;
  } finally {
    closeFd(fd);
  }
  const mountMs = performance.now() - t0;
  return {
    child,
    mountMs,
    async [Symbol.asyncDispose]() {
      unmount(mountPoint, { detach: true });
      await statusWithin(child, 5000).catch(() => {});
    },
  };
}

/** Number of fds open in this process. */
export async function openFdCount(): Promise<number> {
  let n = 0;
  for await (const _ of Deno.readDir("/proc/self/fd")) n++;
  return n;
}
