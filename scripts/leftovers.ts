/**
 * The test suite's last check: nothing it started is left mounted, running or listening.
 *
 *   deno run -A scripts/leftovers.ts snapshot FILE     # at the start of the run
 *   deno run -A scripts/leftovers.ts check FILE        # at the end, after the services stopped
 *
 * `check` compares the machine with the snapshot and exits 1 listing every leak: mounts that
 * appeared (FUSE mounts and bind mounts of the tests' dirs), processes that appeared (mounters,
 * rclone, mount-s3, radosgw and other ceph daemons, etcd, kube-*, deno children, …) and the TCP
 * ports they listen on. Then it kills those processes and detaches those mounts, so a failed run
 * does not leave the machine dirty (the run still fails).
 *
 * Attribution. `scripts/test.sh` runs the suite, when it can, in PID and mount namespaces of its
 * own (`S3CSI_TEST_NS=1`): then every process there other than the runner itself, and every mount
 * that appeared there, is the suite's — precise however many other runs share the machine.
 * Elsewhere (not root, no `unshare`, `KEEP_SERVICES=1`) a new process counts when its command
 * line, working dir or environment names this repository, a `s3csi-` test dir, or this run's
 * `S3CSI_TEST_RUN` id, and a new mount when it is FUSE or lies under such a dir. Processes named
 * in the pid files of services kept on purpose (`KEEP_SERVICES=1`: the RGW and kube-real state
 * dirs) are reported as kept, not as leaks.
 *
 * @module
 */
import { fileURLToPath } from "node:url";
import { unmount } from "../src/sys/mount.ts";
import { readMountInfo } from "../src/sys/mountinfo.ts";
import { readProcStat } from "./proc_stat.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url)).replace(/\/$/, "");

/** One process. */
export interface Proc {
  readonly pid: number;
  /** Start time in clock ticks since boot (pid + start time identify a process). */
  readonly start: string;
  readonly ppid: number;
  readonly cmdline: string;
  readonly cwd: string;
  readonly environ: string;
}

/** One mount. */
export interface Mount {
  /** mountinfo's mount ID (unique while mounted). */
  readonly id: string;
  readonly mountPoint: string;
  readonly fsType: string;
}

/** What the machine had at a moment. */
export interface Snapshot {
  readonly processes: readonly Pick<Proc, "pid" | "start">[];
  readonly mounts: readonly Mount[];
}

/** How the leaks are attributed (see the module doc). */
export interface Attribution {
  /** True inside the suite's own PID and mount namespaces. */
  readonly namespaced: boolean;
  /** This run's id (`S3CSI_TEST_RUN`). */
  readonly runId: string;
  /** Pids never counted: the checker, its ancestors (the runner). */
  readonly ignorePids: ReadonlySet<number>;
  /** Pids of services kept running on purpose. */
  readonly keptPids: ReadonlySet<number>;
}

/** The leaks found. */
export interface Leaks {
  readonly processes: readonly Proc[];
  readonly mounts: readonly Mount[];
  /** Listening TCP ports by pid of a leaked process. */
  readonly listening: ReadonlyMap<number, readonly number[]>;
  readonly kept: readonly Proc[];
}

async function readOr(path: string, fallback = ""): Promise<string> {
  return await Deno.readTextFile(path).catch(() => fallback);
}

/** Every process of this PID namespace. */
export async function listProcesses(): Promise<Proc[]> {
  const out: Proc[] = [];
  for await (const e of Deno.readDir("/proc")) {
    const pid = Number(e.name);
    if (!Number.isInteger(pid)) continue;
    const stat = await readProcStat(pid);
    if (!stat || stat.state === "Z") continue; // gone, or a zombie: holds nothing
    out.push({
      pid,
      start: stat.startTime,
      ppid: stat.ppid,
      cmdline: (await readOr(`/proc/${pid}/cmdline`)).replaceAll("\0", " ").trim(),
      cwd: await Deno.readLink(`/proc/${pid}/cwd`).catch(() => ""),
      environ: await readOr(`/proc/${pid}/environ`),
    });
  }
  return out;
}

/** Pids of this process and its ancestors. */
export async function ancestors(pid = Deno.pid): Promise<Set<number>> {
  const out = new Set<number>();
  while (pid > 0 && !out.has(pid)) {
    out.add(pid);
    pid = (await readProcStat(pid))?.ppid ?? 0;
  }
  return out;
}

/** TCP ports in LISTEN state by socket inode (IPv4 and IPv6). */
export async function listeningInodes(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of (await readOr(file)).split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st … inode (index 9)
      if (f[3] !== "0A" || !f[1] || !f[9]) continue;
      out.set(f[9], parseInt(f[1].split(":")[1] ?? "0", 16));
    }
  }
  return out;
}

async function socketInodes(pid: number): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(`/proc/${pid}/fd`)) {
      const target = await Deno.readLink(`/proc/${pid}/fd/${e.name}`).catch(() => "");
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m) out.push(m[1]!);
    }
  } catch { /* gone or not ours to read */ }
  return out;
}

/** Does `p` belong to the suite, outside its own namespaces? */
export function namesTheSuite(p: Proc, runId: string): boolean {
  const env = p.environ.split("\0");
  return p.cmdline.includes(REPO) || p.cwd === REPO || p.cwd.startsWith(`${REPO}/`) ||
    /s3csi-/.test(p.cmdline) || /(^|\/)s3csi-/.test(p.cwd) ||
    (runId !== "" && env.includes(`S3CSI_TEST_RUN=${runId}`));
}

/** Is a new mount the suite's, outside its own namespaces? */
export function suiteMount(m: Mount): boolean {
  return m.fsType.startsWith("fuse") || /\/s3csi-/.test(m.mountPoint) ||
    m.mountPoint === REPO || m.mountPoint.startsWith(`${REPO}/`);
}

/** Compare `now` with the snapshot `before`. */
export function findLeaks(
  before: Snapshot,
  now: { processes: readonly Proc[]; mounts: readonly Mount[] },
  a: Attribution,
): { processes: Proc[]; mounts: Mount[]; kept: Proc[] } {
  const old = new Set(before.processes.map((p) => `${p.pid}/${p.start}`));
  const oldMounts = new Set(before.mounts.map((m) => `${m.id} ${m.mountPoint}`));
  const fresh = now.processes.filter((p) =>
    !old.has(`${p.pid}/${p.start}`) && !a.ignorePids.has(p.pid)
  );
  const ours = fresh.filter((p) => a.namespaced || namesTheSuite(p, a.runId));
  return {
    processes: ours.filter((p) => !a.keptPids.has(p.pid)),
    kept: ours.filter((p) => a.keptPids.has(p.pid)),
    mounts: now.mounts.filter((m) =>
      !oldMounts.has(`${m.id} ${m.mountPoint}`) && (a.namespaced || suiteMount(m))
    ),
  };
}

/** Human-readable report ("" when nothing leaked). */
export function describeLeaks(l: Leaks): string {
  const out: string[] = [];
  for (const m of l.mounts) out.push(`mounted: ${m.mountPoint} (${m.fsType})`);
  for (const p of l.processes) {
    const ports = l.listening.get(p.pid);
    out.push(
      `running: pid ${p.pid} (parent ${p.ppid}) ${p.cmdline.slice(0, 200)}${
        ports?.length ? ` — listening on TCP ${ports.join(", ")}` : ""
      }`,
    );
  }
  return out.join("\n");
}

async function pidsFromFiles(globs: readonly string[]): Promise<Set<number>> {
  const out = new Set<number>();
  for (const dir of globs) {
    try {
      for await (const e of Deno.readDir(dir)) {
        if (!e.name.endsWith(".pid")) continue;
        const pid = Number((await readOr(`${dir}/${e.name}`)).trim());
        if (Number.isInteger(pid) && pid > 0) out.add(pid);
      }
    } catch { /* no such dir */ }
  }
  return out;
}

async function takeSnapshot(): Promise<Snapshot> {
  return {
    processes: (await listProcesses()).map((p) => ({ pid: p.pid, start: p.start })),
    mounts: (await readMountInfo()).map((m) => ({
      id: String(m.mountId),
      mountPoint: m.mountPoint,
      fsType: m.fsType,
    })),
  };
}

async function check(snapshotPath: string): Promise<number> {
  const before = JSON.parse(await Deno.readTextFile(snapshotPath)) as Snapshot;
  const keep = Deno.env.get("KEEP_SERVICES") === "1";
  const rgwState = Deno.env.get("S3_STATE_DIR") ?? "/var/tmp/s3csi-rgw";
  const krState = Deno.env.get("KUBE_REAL_STATE") ?? "/var/tmp/s3csi-kube-real";
  const attribution: Attribution = {
    namespaced: Deno.env.get("S3CSI_TEST_NS") === "1",
    runId: Deno.env.get("S3CSI_TEST_RUN") ?? "",
    ignorePids: await ancestors(),
    keptPids: keep ? await pidsFromFiles([`${rgwState}/run`, krState]) : new Set(),
  };
  const now = { processes: await listProcesses(), mounts: (await takeSnapshot()).mounts };
  const found = findLeaks(before, now, attribution);
  const inodes = await listeningInodes();
  const listening = new Map<number, number[]>();
  for (const p of [...found.processes, ...found.kept]) {
    const ports = (await socketInodes(p.pid)).map((i) => inodes.get(i)).filter((x) =>
      x !== undefined
    ) as number[];
    if (ports.length) listening.set(p.pid, [...new Set(ports)].sort((a, b) => a - b));
  }
  const leaks: Leaks = { ...found, listening };
  const say = (s: string) => Deno.stderr.writeSync(new TextEncoder().encode(`${s}\n`));
  const how = attribution.namespaced
    ? "in the suite's own PID and mount namespaces"
    : "by command line, working dir and environment (no namespaces of its own)";
  for (const p of leaks.kept) {
    const ports = listening.get(p.pid);
    say(
      `leftovers: kept on purpose (KEEP_SERVICES=1): pid ${p.pid} ${p.cmdline.slice(0, 120)}${
        ports?.length ? ` — TCP ${ports.join(", ")}` : ""
      }`,
    );
  }
  const text = describeLeaks(leaks);
  if (!text) {
    say(`leftovers: nothing left mounted, running or listening (checked ${how})`);
    return 0;
  }
  say(`leftovers: the suite left these behind (checked ${how}):\n${text}`);
  for (const p of leaks.processes) {
    try {
      Deno.kill(p.pid, "SIGKILL");
    } catch { /* gone */ }
  }
  for (const m of [...leaks.mounts].sort((a, b) => b.mountPoint.length - a.mountPoint.length)) {
    try {
      unmount(m.mountPoint, { detach: true });
    } catch { /* reported above */ }
  }
  say(
    `leftovers: killed ${leaks.processes.length} process(es), detached ${leaks.mounts.length} mount(s); the run fails`,
  );
  return 1;
}

if (import.meta.main) {
  const [cmd, file] = Deno.args;
  if ((cmd !== "snapshot" && cmd !== "check") || !file) {
    Deno.stderr.writeSync(new TextEncoder().encode("usage: leftovers.ts snapshot|check FILE\n"));
    Deno.exit(2);
  }
  if (cmd === "snapshot") {
    await Deno.writeTextFile(file, JSON.stringify(await takeSnapshot()));
  } else {
    Deno.exit(await check(file));
  }
}
