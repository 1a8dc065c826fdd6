/**
 * The real node seen from the host: containers by id (containerd's `ctr`), their processes and
 * `/proc/<pid>/status`, the processes of pods (kubepods cgroups), and container logs read from the
 * kubelet's log files (CRI format). Tests and the sandbox use it to check what only a real node
 * shows (who a Mountpoint container runs as, what is left after a teardown) and to kill
 * containers the way a crash would.
 *
 * @module
 */
import type { RealNode } from "./real_node.ts";
import { readProcStat } from "../../../../scripts/proc_stat.ts";

/** Runs `ctr -n k8s.io` against the node's containerd; resolves with stdout. */
export async function ctr(
  node: Pick<RealNode, "containerdAddress">,
  args: string[],
): Promise<string> {
  const r = await new Deno.Command("ctr", {
    args: ["--address", node.containerdAddress, "-n", "k8s.io", ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  if (!r.success) {
    throw new Error(
      `ctr ${args.join(" ")} failed (exit ${r.code}): ${dec.decode(r.stderr).trim()}`,
    );
  }
  return dec.decode(r.stdout);
}

/** A container status as the tests read it. */
export interface ContainerStatusLike {
  name: string;
  containerID?: string;
  restartCount?: number;
  ready?: boolean;
  state?: { running?: { startedAt?: string } };
}

/** The containerd id of `status` (`containerd://<id>`), or undefined when not started. */
export function containerIdOf(status: ContainerStatusLike | undefined): string | undefined {
  const id = status?.containerID;
  return id?.startsWith("containerd://") ? id.slice("containerd://".length) : undefined;
}

/** Host pid of a running container's init process (`ctr tasks ls`). */
export async function taskPid(
  node: Pick<RealNode, "containerdAddress">,
  containerId: string,
): Promise<number> {
  for (const line of (await ctr(node, ["tasks", "ls"])).split("\n").slice(1)) {
    const [id, pid, status] = line.trim().split(/\s+/);
    if (id === containerId && status === "RUNNING") return Number(pid);
  }
  throw new Error(`no running task for container ${containerId}`);
}

/** Kill a container's processes like a crash would (the kubelet then restarts it). */
export async function killContainer(
  node: Pick<RealNode, "containerdAddress">,
  containerId: string,
  signal = "SIGKILL",
): Promise<void> {
  await ctr(node, ["tasks", "kill", "--signal", signal, containerId]);
}

/** `/proc/<pid>/status` as a map (`Uid` → `1000\t1000\t1000\t1000`, …). */
export async function procStatus(pid: number): Promise<Map<string, string>> {
  const text = await Deno.readTextFile(`/proc/${pid}/status`);
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const i = line.indexOf(":");
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return out;
}

/** One process of the host. */
export interface HostProcess {
  readonly pid: number;
  readonly ppid: number;
  readonly cmdline: string;
  /** Pod UID from its kubepods cgroup, when it belongs to a pod. */
  readonly podUid?: string;
}

/** The pod UID a kubepods cgroup path names (`…/pod<uid>/<container>`), or undefined. */
export function podUidOfCgroup(cgroup: string): string | undefined {
  const m =
    /kubepods[^\n]*?[/-]pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})/
      .exec(cgroup);
  return m ? m[1]!.replaceAll("_", "-") : undefined;
}

/** Every process of the host (pid, parent, command line, pod). */
export async function hostProcesses(): Promise<HostProcess[]> {
  const out: HostProcess[] = [];
  for await (const e of Deno.readDir("/proc")) {
    const pid = Number(e.name);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = await readProcStat(pid);
      if (!stat) continue;
      const ppid = stat.ppid;
      const cmdline = (await Deno.readTextFile(`/proc/${pid}/cmdline`)).replaceAll("\0", " ")
        .trim();
      const podUid = podUidOfCgroup(await Deno.readTextFile(`/proc/${pid}/cgroup`));
      out.push({ pid, ppid, cmdline, ...(podUid ? { podUid } : {}) });
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** `pid` and all its descendants. */
export function processTree(all: readonly HostProcess[], pid: number): HostProcess[] {
  const tree: HostProcess[] = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift()!;
    const self = all.find((x) => x.pid === p);
    if (self) tree.push(self);
    for (const c of all) if (c.ppid === p) queue.push(c.pid);
  }
  return tree;
}

/**
 * Text of a kubelet container log file (CRI format: `<time> <stream> <P|F> <text>` per line; `P`
 * marks a partial line continued by the next entry).
 */
export function criLogText(raw: string): string {
  let out = "";
  for (const line of raw.split("\n")) {
    if (!line) continue;
    const m = /^\S+ (?:stdout|stderr) ([PF]) ?(.*)$/.exec(line);
    if (!m) continue;
    out += m[2]! + (m[1] === "F" ? "\n" : "");
  }
  return out;
}

/**
 * Output of a container's latest run, read from the kubelet's pod log dir (`podLogsDir` is
 * `<state>/pod-logs`); "" when it never started.
 */
export async function containerLog(
  node: Pick<RealNode, "state">,
  pod: { metadata: { namespace?: string; name: string; uid?: string } },
  container: string,
): Promise<string> {
  const dir =
    `${node.state}/pod-logs/${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}/${container}`;
  let latest = -1;
  try {
    for await (const e of Deno.readDir(dir)) {
      const m = /^(\d+)\.log$/.exec(e.name);
      if (m) latest = Math.max(latest, Number(m[1]));
    }
  } catch {
    return "";
  }
  if (latest < 0) return "";
  return criLogText(await Deno.readTextFile(`${dir}/${latest}.log`).catch(() => ""));
}
