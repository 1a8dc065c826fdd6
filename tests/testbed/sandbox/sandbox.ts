/**
 * `deno task sandbox`: the one-machine cluster on which the driver is shown end to end. The
 * control plane (API server, scheduler, PV binder, csi-provisioner) and the kubelet are emulated —
 * or, with `--real-apiserver`, the API server and PV binder are the real kube-apiserver and
 * kube-controller-manager; processes, FUSE, gRPC and S3 are real. Starts everything, runs one
 * scenario of `tests/scenarios/` (`--scenario NAME`; by default the walk-through), prints each
 * step, then tears it all down (after Ctrl-C with `--keep`) and checks that no driver process
 * crashed and nothing is left mounted or running. Exit 0 only when every step completed.
 *
 * @module
 */
import type { ParsedConfig } from "../../../src/util/config.ts";
import { configureLogging, type LOG_OPTIONS } from "../../../src/util/log.ts";
import { SandboxEnv } from "./sandbox_env.ts";
import type { SANDBOX_OPTIONS } from "./sandbox_options.ts";
import { runRegisteredScenario, scenarioCluster } from "./run_scenario.ts";
import type { ScenarioCluster } from "../../scenarios/cluster.ts";
import { DEFAULT_SCENARIO, scenarioNamed } from "../../scenarios/registry.ts";
import { StepReporter } from "./step_reporter.ts";
import type { S3Choice } from "./s3_server.ts";
import type { Engine } from "../../../src/mppod/mount_message.ts";
import {
  checkMountpointsAndWorkloads,
  checkNoCrashes,
  checkNothingLeft,
  mountsUnder,
} from "./leftovers.ts";
import { kubectlPath } from "../../_helpers.ts";

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
  const scenarioId = config.scenario ?? DEFAULT_SCENARIO;
  const scenario = scenarioNamed(scenarioId)!; // --scenario's choices are the registry's names
  if (scenario.realNodeOnly && !config["real-node"]) {
    r.line(`--scenario ${scenarioId} runs on the real node: add --real-node.`);
    logFile.close();
    return 2;
  }
  if (!config["real-node"] && scenario.nodes > config.nodes) {
    r.line(
      `--scenario ${scenarioId} needs ${scenario.nodes} nodes: add --nodes ${scenario.nodes}.`,
    );
    logFile.close();
    return 2;
  }
  // "Every step completed": with a scenario asked for, a skipped step fails the run too.
  if (config.scenario) r.failOnSkip = true;
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
    realNodes: scenario.nodes,
    timeoutMs: config.timeout,
  }, r);
  // The scenario's view of the cluster; it serves the closing check too, while the pods still run.
  let cluster: ScenarioCluster | undefined;
  try {
    if (await env.start() && !signal.aborted) {
      r.line();
      r.line(`kubeconfig: ${dir}/kubeconfig`);
      r.line(`  export KUBECONFIG=${dir}/kubeconfig`);
      const kubectl = kubectlPath();
      r.line(
        kubectl
          ? `  alias kubectl=${kubectl}   # the kubectl scripts/setup.sh built (Kubernetes 1.32)`
          : "  (no kubectl built yet: scripts/setup.sh builds one matching Kubernetes 1.32)",
      );
      r.line(
        "  kubectl get nodes,pv,pvc,sc -A && kubectl get pods -A -o wide && kubectl get s3pa -A",
      );
      r.line("  kubectl get events -A --sort-by=.lastTimestamp");
      if (!env.real && !env.realNode && scenarioId === DEFAULT_SCENARIO) {
        r.line(`  kubectl logs -n ${env.namespace} sandbox-writer`);
      }
      r.line(
        env.realNode?.node
          ? `logs: ${dir}/logs (image build, deploy), ${env.realNode.node.state}/logs (cluster), ${env.realNode.node.state}/pod-logs (containers)`
          : `logs: ${dir}/logs (driver processes), ${dir}/node-*/kubelet/pod-logs (containers)`,
      );
      r.line();
      cluster = scenarioCluster(env, dir, {
        stepTimeoutMs: config.timeout,
        keepWorkloads: config.keep,
      });
      await runRegisteredScenario(cluster, r, scenarioId, scenario);
      if (config.keep && !signal.aborted) {
        r.line();
        r.line("--keep: running until Ctrl-C (SIGINT) or SIGTERM…");
        await waitForAbort(signal);
      }
    }
  } finally {
    r.line();
    if (cluster) {
      await checkMountpointsAndWorkloads(r, cluster);
      await cluster.dispose();
    }
    await env.drain();
    await env.stop();
    await checkNoCrashes(r, env.crashes());
    await checkNothingLeft(r, dir);
    logFile.close();
  }
  r.line();
  const code = r.finish((performance.now() - t0) / 1000);
  if (code === 0 && !config.dir && !(await mountsUnder(dir)).length) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  } else {
    r.line(`state and logs kept in ${dir}`);
  }
  return code;
}
