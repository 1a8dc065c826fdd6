/**
 * The end-of-run checks every sandbox mode (and the e2e tier) shares: no driver process crashed
 * or was restarted, and nothing is left mounted under the state dir or running with it in its
 * command line or environment. Each check is one reported step; a failed check fails the run.
 *
 * @module
 */
import { ancestors } from "../../../scripts/leftovers.ts";
import { unmount } from "../../../src/sys/mount.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { type Crash, describeCrashes } from "./child_process.ts";
import type { StepReporter } from "./step_reporter.ts";
import type { ScenarioCluster } from "../../scenarios/cluster.ts";

/**
 * Processes (pid → cmdline) whose command line or environment (other than `KUBECONFIG`) names
 * `dir`, except this process and its ancestors (`deno task sandbox --dir …`).
 */
export async function processesUsing(dir: string): Promise<Map<number, string>> {
  const found = new Map<number, string>();
  const mine = await ancestors();
  for await (const e of Deno.readDir("/proc")) {
    const pid = Number(e.name);
    if (!Number.isInteger(pid) || mine.has(pid)) continue;
    const cmdline = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch(() => "");
    const environ = await Deno.readTextFile(`/proc/${pid}/environ`).catch(() => "");
    // KUBECONFIG alone does not count: a user's kubectl run against the sandbox is not a leak.
    const env = environ.split("\0").filter((kv) => !kv.startsWith("KUBECONFIG="));
    if (cmdline.includes(dir) || env.some((kv) => kv.includes(dir))) {
      found.set(pid, cmdline.replaceAll("\0", " ").trim());
    }
  }
  return found;
}

/** Mount points under `dir`. */
export async function mountsUnder(dir: string): Promise<string[]> {
  return (await readMountInfo()).map((m) => m.mountPoint).filter((p) =>
    p === dir || p.startsWith(`${dir}/`)
  );
}

/**
 * Last resort after a failed leak check: SIGKILL leftover processes and detach leftover mounts
 * (deepest first), so a failed run does not leave the machine dirty. The run still fails.
 * Returns what was done ("" when there was nothing).
 */
export async function cleanUpLeftovers(dir: string): Promise<string> {
  const procs = await processesUsing(dir);
  for (const pid of procs.keys()) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone */ }
  }
  const mounts = (await mountsUnder(dir)).sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    try {
      unmount(m, { detach: true });
    } catch { /* counted below */ }
  }
  if (!procs.size && !mounts.length) return "";
  const left = (await mountsUnder(dir)).length;
  return `killed ${procs.size} process(es), detached ${
    mounts.length - left
  } of ${mounts.length} mount(s)`;
}

/** What is left under `dir`, as one line; "" when nothing. */
export async function leftoversOf(dir: string): Promise<string> {
  const mounts = await mountsUnder(dir);
  const procs = await processesUsing(dir);
  if (!mounts.length && !procs.size) return "";
  return `${mounts.length} mount(s) [${mounts.join(", ")}], ${procs.size} process(es) [${
    [...procs.entries()].map(([p, c]) => `${p}: ${c.slice(0, 120)}`).join("; ")
  }]`;
}

/** Step: no driver process exited unexpectedly (each crash printed with its last log lines). */
export async function checkNoCrashes(r: StepReporter, crashes: readonly Crash[]): Promise<void> {
  await r.step("Driver processes ran without a crash or restart", () => {
    if (crashes.length) {
      return Promise.reject(
        new Error(`${crashes.length} unexpected exit(s):\n${describeCrashes(crashes)}`),
      );
    }
    return Promise.resolve("");
  });
}

/** Step: nothing left under `dir`; on failure, kill and detach what is left (the run still fails). */
export async function checkNothingLeft(r: StepReporter, dir: string): Promise<void> {
  await r.step("Nothing left mounted or running", async () => {
    const left = await leftoversOf(dir);
    if (left) throw new Error(left);
    return "";
  });
  const cleaned = await cleanUpLeftovers(dir);
  if (cleaned) r.report("Leftovers cleaned up", "info", cleaned);
}

/**
 * Step: no Mountpoint container was restarted and every running workload's volume answers from
 * inside the workload (a dead mount in a container's own namespace shows here even when the
 * driver's processes never crashed and the host's view was repaired).
 */
export async function checkMountpointsAndWorkloads(
  r: StepReporter,
  cluster: ScenarioCluster,
): Promise<void> {
  await r.step(
    "Mountpoint containers ran without a restart; workload mounts answer from inside",
    async () => {
      const { detail, problems } = await cluster.closingCheck();
      if (problems.length) throw new Error(`${detail}:\n${problems.join("\n")}`);
      return detail;
    },
    (detail) => detail,
  );
}
