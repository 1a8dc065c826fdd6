/**
 * `deno task sandbox`: the one-machine cluster on which the driver is shown end to end. The
 * control plane (API server, scheduler, PV binder, csi-provisioner) and the kubelet are emulated —
 * or, with `--real-apiserver`, the API server and PV binder are the real kube-apiserver and
 * kube-controller-manager; processes, FUSE, gRPC and S3 are real. Starts everything, runs the scenario, prints each step, then tears it all
 * down and checks that nothing is left mounted or running (or waits for Ctrl-C with `--keep`).
 *
 * @module
 */
import type { ParsedConfig } from "../../../src/util/config.ts";
import { configureLogging, type LOG_OPTIONS } from "../../../src/util/log.ts";
import { unmount } from "../../../src/sys/mount.ts";
import { readMountInfo } from "../../../src/sys/mountinfo.ts";
import { SandboxEnv } from "./sandbox_env.ts";
import type { SANDBOX_OPTIONS } from "./sandbox_options.ts";
import { runScenario } from "./scenario.ts";
import { StepReporter } from "./step_reporter.ts";
import type { S3Choice } from "./s3_server.ts";
import type { Engine } from "../../../src/mppod/mount_message.ts";

async function ancestors(): Promise<Set<number>> {
  const out = new Set<number>();
  let pid = Deno.pid;
  while (pid > 1 && !out.has(pid)) {
    out.add(pid);
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => "");
    pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] ?? 0);
  }
  return out;
}

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
 */
async function cleanUpLeftovers(dir: string, r: StepReporter): Promise<void> {
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
    } catch { /* reported below */ }
  }
  if (procs.size || mounts.length) {
    const left = (await mountsUnder(dir)).length;
    r.report(
      "Leftovers cleaned up",
      "info",
      `killed ${procs.size} process(es), detached ${
        mounts.length - left
      } of ${mounts.length} mount(s)`,
    );
  }
}

function waitForAbort(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** Run the sandbox; resolves with the exit code (0 when no step failed). */
export async function runSandbox(
  config: ParsedConfig<typeof SANDBOX_OPTIONS & typeof LOG_OPTIONS>,
  signal: AbortSignal,
): Promise<number> {
  const t0 = performance.now();
  const dir = config.dir ?? await Deno.makeTempDir({ prefix: "s3csi-sandbox-" });
  await Deno.mkdir(`${dir}/logs`, { recursive: true });
  await Deno.chmod(dir, 0o755);
  const logFile = await Deno.open(`${dir}/logs/sandbox.log`, { create: true, append: true });
  const encoder = new TextEncoder();
  configureLogging({
    level: config["log-level"],
    format: "text",
    write: (line) => {
      logFile.writeSync(encoder.encode(line));
    },
  });
  const r = new StepReporter();
  if (config["real-node"] && (config["real-apiserver"] || config["without-controller"])) {
    r.line("--real-node runs the deployed driver on a real cluster: it takes neither");
    r.line("--real-apiserver nor --without-controller.");
    logFile.close();
    return 2;
  }
  if (config["real-node"]) {
    r.line(
      "s3-csi sandbox on a real node: kubelet + containerd, etcd, kube-apiserver, kube-controller-",
    );
    r.line(
      "manager, kube-scheduler and kube-proxy are real; the driver is deployed with `deno task",
    );
    r.line(
      "deploy` from locally built images (csi-provisioner, node-driver-registrar and livenessprobe",
    );
    r.line(
      "are stand-ins: tests/testbed/services/real_node/README.md); FUSE, CSI gRPC and S3 are real.",
    );
  } else if (config["real-apiserver"]) {
    r.line("s3-csi sandbox: real kube-apiserver and kube-controller-manager; the scheduler,");
    r.line("csi-provisioner and kubelet are emulated; processes, FUSE, CSI gRPC and S3 are real.");
  } else {
    r.line("s3-csi sandbox: the API server, scheduler, PV binder, csi-provisioner and kubelet are");
    r.line("emulated; processes, FUSE mounts, CSI gRPC and S3 are real.");
  }
  r.line(`state and logs: ${dir}`);
  r.line();
  const env = new SandboxEnv({
    dir,
    nodes: config.nodes,
    s3: config.s3 as S3Choice,
    engine: config.engine as "auto" | Engine,
    signal,
    withoutController: config["without-controller"],
    realApiserver: config["real-apiserver"],
    realNode: config["real-node"],
  }, r);
  try {
    if (await env.start() && !signal.aborted) {
      r.line();
      r.line(`kubeconfig: ${dir}/kubeconfig`);
      r.line(`  export KUBECONFIG=${dir}/kubeconfig`);
      r.line(
        "  kubectl get nodes,pv,pvc,sc -A && kubectl get pods -A -o wide && kubectl get s3pa -A",
      );
      r.line("  kubectl get events -A --sort-by=.lastTimestamp");
      r.line(
        env.realNode?.node
          ? `logs: ${dir}/logs (image build, deploy), ${env.realNode.node.state}/logs (cluster), ${env.realNode.node.state}/pod-logs (containers)`
          : `logs: ${dir}/logs (driver processes), ${dir}/node-*/kubelet/pod-logs (containers)`,
      );
      r.line();
      await runScenario(env, r, {
        bucket: `sandbox-${env.runId}`,
        mountTimeoutMs: config["mount-timeout"],
        controllerTimeoutMs: config["controller-timeout"],
        keepWorkload: config.keep,
      });
      if (config.keep && !signal.aborted) {
        r.line();
        r.line("--keep: running until Ctrl-C (SIGINT) or SIGTERM…");
        await waitForAbort(signal);
      }
    }
  } finally {
    r.line();
    await env.drain();
    await env.stop();
    await r.step("Nothing left mounted or running", async () => {
      const mounts = await mountsUnder(dir);
      const procs = await processesUsing(dir);
      if (mounts.length || procs.size) {
        throw new Error(
          `${mounts.length} mount(s) [${mounts.join(", ")}], ${procs.size} process(es) [${
            [...procs.entries()].map(([p, c]) => `${p}: ${c.slice(0, 80)}`).join("; ")
          }]`,
        );
      }
      return "";
    });
    await cleanUpLeftovers(dir, r);
    logFile.close();
  }
  const counts = r.counts();
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  r.line();
  r.line(`${counts.ok} done, ${counts.pending} pending, ${counts.failed} failed in ${seconds} s`);
  if (r.ok && !config.dir && !(await mountsUnder(dir)).length) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  } else {
    r.line(`state kept in ${dir}`);
  }
  return r.ok ? 0 : 1;
}
