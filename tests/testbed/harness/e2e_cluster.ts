/**
 * One running sandbox ({@link SandboxEnv}: API emulator or the real kube-apiserver, scheduler, PV
 * binder, kubelet emulators, node plugin processes, an S3 server) as a {@link ScenarioCluster}:
 * `deno task sandbox` runs the scenarios of `tests/scenarios/` on it, and so does the e2e tier,
 * whose harness is the rest of this module: one sandbox (Ceph RGW of its own) per test file, plus
 * the controller process serving the CSI Controller service and the csi-provisioner emulation, so
 * static and dynamic volumes both work. Each scenario is a `t.step` that creates objects with
 * unique names and deletes them again; the sandbox is stopped at the end of the file's test and
 * the run fails when a Mountpoint Pod is not released, a driver process crashed (a node plugin
 * restart counts), or anything is left mounted or running under its state dir.
 *
 * Needs root, /dev/fuse, rclone and Ceph RGW (`radosgw`); skips with the reason otherwise.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KubeClient } from "../../../src/kube/client.ts";
import { PODS } from "../../../src/kube/resources.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../../../src/mppod/labels.ts";
import { type HostProcess, hostProcesses, processTree } from "../services/real_node/host.ts";
import type { Pod } from "../kubelet/k8s_types.ts";
import { CSI_PLUGIN_DIR, csiTargetPath, podVolumesDir } from "../kubelet/kubelet_paths.ts";
import { CREDENTIALS_FILE } from "../../../src/node/credentials.ts";
import { describeCrashes } from "../sandbox/child_process.ts";
import { cleanUpLeftovers, leftoversOf, processesUsing } from "../sandbox/leftovers.ts";
import { SandboxEnv } from "../sandbox/sandbox_env.ts";
import type { S3Env } from "../sandbox/s3_server.ts";
import { StepReporter } from "../sandbox/step_reporter.ts";
import { type MountInfo, readMountInfo } from "../../../src/sys/mountinfo.ts";
import { errorMessage } from "../../../src/util/errors.ts";
import { runToEnd, testOrSkip } from "../../_helpers.ts";
import { findFiles, type Scenario, ScenarioCluster, stepsOf } from "../../scenarios/cluster.ts";

/** Namespace of the workloads. */
export const NS = "default";

function commandExists(name: string): boolean {
  return new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null" })
    .outputSync().success;
}

/** Why the e2e tier cannot run on this machine, or undefined. */
export function e2eSkipReason(): string | undefined {
  if (Deno.build.os !== "linux") return "needs Linux";
  if (Deno.uid() !== 0) return "needs root (FUSE mounts, pods under other uids, RGW)";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  if (!commandExists("rclone")) return "needs rclone (the FUSE engine)";
  if (!commandExists("radosgw")) {
    return "needs Ceph RGW (radosgw): run tests/testbed/services/s3/rgw_start.sh once to install it";
  }
  if (!commandExists("setpriv")) return "needs setpriv (util-linux)";
  return undefined;
}

/** One running sandbox, as a {@link ScenarioCluster}. */
export class E2E extends ScenarioCluster {
  readonly env: SandboxEnv;
  readonly dir: string;

  constructor(env: SandboxEnv, dir: string) {
    super();
    this.env = env;
    this.dir = dir;
  }

  get client(): KubeClient {
    return this.env.client!;
  }

  /** The sandbox RGW's settings (incl. the second user's keys). */
  get s3Env(): S3Env {
    return this.env.s3!.env;
  }

  /** `default` on the API emulator (and in the e2e tier); unique per run on the real tier. */
  get ns(): string {
    return this.env.namespace;
  }

  override get mpNamespace(): string {
    return this.env.mpNamespace;
  }

  get kubeconfig(): string {
    return this.env.kubeconfig;
  }

  /** The kubelet emulator runs `busybox` from the host. */
  get workloadImage(): { image: string } {
    return { image: "busybox" };
  }

  nodeNames(): string[] {
    return this.env.nodes.map((n) => n.name);
  }

  kubeletRoot(node: string): string {
    const n = this.env.nodes.find((x) => x.name === node);
    if (!n) throw new Error(`no node ${node}`);
    return n.root;
  }

  /** Container output of a pod (current run). */
  async log(pod: Pod, container = "main"): Promise<string> {
    for (const n of this.env.nodes) {
      const path = n.kubelet.containerLogPath(pod.metadata.uid, container) ??
        `${n.root}/pod-logs/${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}/${container}/0.log`;
      const text = await Deno.readTextFile(path).catch(() => undefined);
      if (text !== undefined) return text;
    }
    return "";
  }

  protected async nodePluginLogs(): Promise<string> {
    // The node plugins' own words (restarts included) explain most publish failures.
    const plugins = await Promise.all(this.env.nodes.map(async (n) => {
      const text = await Deno.readTextFile(n.plugin.logPath).catch(() => "");
      return `\n--- ${n.name} node plugin (restarts ${n.plugin.restarts}), last lines:\n${
        text.slice(-1500)
      }`;
    }));
    return plugins.join("");
  }

  /** FUSE mounts (sources and bind mounts) under the sandbox's state dir. */
  async fuseMounts(): Promise<MountInfo[]> {
    return (await readMountInfo()).filter((m) =>
      m.mountPoint.startsWith(`${this.dir}/`) && m.fsType.startsWith("fuse")
    );
  }

  async credentialFiles(): Promise<string[]> {
    return await findFiles(
      this.dir,
      (p, info) =>
        p.endsWith(`/${CREDENTIALS_FILE}`) || (info.isDirectory && p.endsWith("/credentials")),
    );
  }

  /** Processes naming the state dir (mounters, workloads), and rclone serving `buckets`. */
  async engineProcesses(buckets: readonly string[]): Promise<string[]> {
    const r = await runToEnd("pgrep", ["-af", "rclone"]);
    const engines = r.stdout.split("\n").filter((l) => buckets.some((b) => l.includes(b)));
    return [...await this.strayProcesses(), ...engines];
  }

  async leftoverPodDirs(uids: readonly string[]): Promise<string[]> {
    const left: string[] = [];
    for (const n of this.env.nodes) {
      for (const uid of uids) {
        const dir = `${n.root}/pods/${uid}`;
        if (await Deno.lstat(dir).then(() => true, () => false)) left.push(dir);
      }
    }
    return left;
  }

  async foreignSockets(): Promise<string[]> {
    const expected = new Set([
      ...this.env.nodes.map((n) => n.socket),
      `${this.dir}/controller/csi.sock`,
    ]);
    const sockets = await findFiles(this.dir, (_p, info) => info.isSocket === true);
    return sockets.filter((s) => !expected.has(s));
  }

  /**
   * The emulated kubelet runs the Mountpoint container as a host process, its own process group:
   * the mounter, become `s3-csi-supervisor` with the pod's comm dir (under its UID) in its
   * arguments; the engine is its child.
   */
  async mountpointProcesses(name: string): Promise<{ container?: number; engine?: number }> {
    const pod = await this.client.get<Pod>(PODS, name, DEFAULT_MOUNTPOINT_NAMESPACE);
    const uid = pod?.metadata.uid;
    if (!uid) return {};
    const all = await hostProcesses();
    const program = (p: HostProcess) => p.cmdline.split(" ")[0]!.replace(/^.*\//, "");
    const container = all.find((p) =>
      program(p) === "s3-csi-supervisor" && p.cmdline.includes(`/pods/${uid}/`)
    );
    if (!container) return {};
    const engine = processTree(all, container.pid).find((p) =>
      p.pid !== container.pid && /^(rclone|mount-s3)$/.test(program(p))
    );
    return { container: container.pid, ...(engine ? { engine: engine.pid } : {}) };
  }

  /**
   * The emulated kubelet's containers share the host's mount namespace with their volume paths
   * rewritten to the target paths: those are what the workload sees.
   */
  async workloadMountViews(pod: Pod): Promise<{ mountPath: string; view: string }[]> {
    const node = pod.spec?.nodeName;
    if (!node) return [];
    const root = this.kubeletRoot(node);
    const dir = `${podVolumesDir(root, pod.metadata.uid)}/${CSI_PLUGIN_DIR}`;
    const views: { mountPath: string; view: string }[] = [];
    try {
      for await (const d of Deno.readDir(dir)) {
        views.push({ mountPath: d.name, view: csiTargetPath(root, pod.metadata.uid, d.name) });
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    return views;
  }

  /** SIGKILL the container's process group, as a runtime kills a container; the kubelet restarts it. */
  async killMountpointContainer(name: string): Promise<void> {
    const { container } = await this.mountpointProcesses(name);
    if (container === undefined) throw new Error(`Mountpoint Pod ${name} has no running container`);
    Deno.kill(-container, "SIGKILL");
  }

  /** The sandbox's own long-running processes (node plugins, controller). */
  driverPids(): Set<number> {
    const pids = new Set(this.env.nodes.map((n) => n.plugin.pid));
    if (this.env.controller) pids.add(this.env.controller.pid);
    return pids;
  }

  /** Processes naming the state dir other than the driver's own (mounters, engines, workloads). */
  async strayProcesses(): Promise<string[]> {
    const mine = this.driverPids();
    return [...(await processesUsing(this.dir))].filter(([pid]) => !mine.has(pid)).map((
      [pid, cmd],
    ) => `${pid} ${cmd.slice(0, 160)}`);
  }
}

/**
 * Run `fn` against a fresh sandbox (RGW, `nodes` nodes, controller with the Controller service,
 * provisioner emulation); tear everything down afterwards and fail on leftovers.
 */
export async function withSandbox(
  opts: { nodes?: number; name: string; engine?: "mount-s3" | undefined },
  fn: (e: E2E) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "s3csi-e2e-" });
  await Deno.chmod(dir, 0o755);
  const stop = new AbortController();
  const out: string[] = [];
  const env = new SandboxEnv(
    {
      dir,
      nodes: opts.nodes ?? 1,
      // rclone on RGW by default; mount-s3 where a scenario needs it, on versitygw (Ceph RGW 16
      // refuses its multipart writes).
      s3: opts.engine ? "versitygw" : "rgw",
      engine: opts.engine ?? "rclone",
      signal: stop.signal,
    },
    new StepReporter((t) => out.push(t)),
  );
  const e = new E2E(env, dir);
  const t0 = performance.now();
  let failure: unknown;
  try {
    assert.ok(await env.start(), `sandbox did not start:\n${out.join("")}`);
    // The sandbox goes on without a controller (its steps then fail naming it); e2e needs one.
    assert.ok(env.provisioner, `no controller with a connected csi-provisioner:\n${out.join("")}`);
    report(`${opts.name}: sandbox up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await fn(e);
  } catch (err) {
    failure = err;
  }
  const leaks: string[] = [];
  try {
    await env.drain().catch(() => {});
    // Every Mountpoint Pod must be released once its workloads are gone — also after a failed
    // mount (the mounter exits when the node plugin writes mount.exit). Stopping the controller
    // and kubelets mid-release would also leave their source mounts.
    if (env.client && env.controller?.exitCode === undefined) {
      await e.waitReleased(45_000).catch(async (err) => {
        const left = (await e.mountpointPods().catch(() => [])).map((p) =>
          `${p.metadata.name} (${p.status?.phase ?? "?"})`
        );
        leaks.push(
          `release: ${errorMessage(err)}; Mountpoint Pods still there: ${left.join(", ")}`,
        );
      });
    }
    await env.stop().catch((err) => leaks.push(`stop: ${errorMessage(err)}`));
    stop.abort();
    const crashes = env.crashes();
    if (crashes.length) {
      leaks.push(
        `${crashes.length} driver process crash(es) (each node plugin crash was followed by a restart):\n${
          describeCrashes(crashes)
        }`,
      );
    }
    const left = await leftoversOf(dir);
    if (left) leaks.push(`left after teardown: ${left}`);
    await cleanUpLeftovers(dir);
  } finally {
    if (!failure && !leaks.length) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    } else {
      report(`${opts.name}: state and logs kept in ${dir}`);
    }
  }
  e.close();
  report(`${opts.name}: whole file ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  if (failure && leaks.length) {
    throw new Error(`${errorMessage(failure)}\nand at teardown: ${leaks.join("\n")}`, {
      cause: failure,
    });
  }
  if (failure) throw failure;
  if (leaks.length) throw new Error(`teardown found: ${leaks.join("\n")}`);
}

/**
 * One sandbox at a time per machine: `deno test --parallel` runs test files as workers of one
 * process, and the sandbox's RGW state dir is keyed by the process id, so two sandboxes of one
 * process would share (and purge) one RGW cluster.
 */
async function exclusive<T>(fn: () => Promise<T>): Promise<T> {
  const lock = await Deno.open(LOCK_PATH, { create: true, write: true });
  try {
    await lock.lock(true);
    return await fn();
  } finally {
    await lock.unlock().catch(() => {});
    lock.close();
  }
}

const LOCK_PATH = "/tmp/s3csi-e2e-sandbox.lock";

/** Print one line to stderr (collected in the tier's report). */
export function report(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`E2E ${line}\n`));
}

/**
 * Declare a file's test: skipped (with the reason printed) where the tier cannot run, or for
 * `skip` (a further need of this file, e.g. the suite's kubectl).
 */
export function e2eTest(
  name: string,
  nodes: number,
  fn: (e: E2E, t: Deno.TestContext) => Promise<void>,
  skip?: string,
  engine?: "mount-s3",
): void {
  testOrSkip(e2eSkipReason() ?? skip, {
    name,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn(t) {
      await exclusive(() => withSandbox({ nodes, name, engine }, (e) => fn(e, t)));
    },
  });
}

/** Declare a file's test running one shared scenario (`tests/scenarios/`) on `nodes` nodes. */
export function e2eScenario(scenario: Scenario, nodes = scenario.nodes): void {
  e2eTest(
    `e2e: ${scenario.name}`,
    nodes,
    (e, t) => scenario.run(e, stepsOf(t)),
    undefined,
    scenario.engine,
  );
}
