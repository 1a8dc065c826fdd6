/**
 * The real-node cluster from Deno (a test tier, the sandbox): starts and stops it through the
 * scripts beside this file and reads what `start.sh` prints. Exit code 3 of a script means "this
 * machine cannot run a real node"; it becomes {@link RealNodeUnavailable} with the script's reason,
 * so a caller can skip with that reason.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

const HERE = fileURLToPath(new URL("./", import.meta.url));

/** What `start.sh` prints: where the cluster is and how to reach it. */
export interface RealNode {
  /** Admin kubeconfig. */
  readonly kubeconfig: string;
  /** kubectl of the cluster's version (built with it; never the machine's). */
  readonly kubectl: string;
  /** Node name. */
  readonly nodeName: string;
  /** Node address (the apiserver listens there too). */
  readonly nodeIp: string;
  /** containerd socket, for `ctr -n k8s.io` (image imports). */
  readonly containerdAddress: string;
  /** Prefix of the testbed images (pause, sidecar stand-ins, busybox). */
  readonly imagePrefix: string;
  /** State dir (logs in `<state>/logs`). */
  readonly state: string;
  /** False when `start.sh` found a healthy node and reused it. */
  readonly startedHere?: boolean;
}

/** The second node (`worker.sh start`), joined to the same control plane. */
export interface RealWorker {
  /** Node name. */
  readonly nodeName: string;
  /** Node address (in its own network namespace). */
  readonly nodeIp: string;
  /** Its containerd socket (image imports). */
  readonly containerdAddress: string;
  /** Its state dir: pid files, `pod-logs`, `logs`. */
  readonly state: string;
  /** False when `worker.sh` found a healthy second node and reused it. */
  readonly startedHere?: boolean;
}

/** The machine cannot run a real node (not root, packages missing, no Go, ...). */
export class RealNodeUnavailable extends Error {
  /** Error name. */
  override name = "RealNodeUnavailable";
}

/** A real-node script failed. */
export class RealNodeError extends Error {
  /** Error name. */
  override name = "RealNodeError";
}

/** Parses `KEY=VALUE` lines (blank lines and `#` comments ignored). */
export function parseEnvLines(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (!t || t.startsWith("#")) continue;
    const eq = t.indexOf("=");
    if (eq <= 0) throw new RealNodeError(`start.sh printed a line that is not KEY=VALUE: ${t}`);
    out[t.slice(0, eq)] = t.slice(eq + 1);
  }
  return out;
}

/** The {@link RealNode} described by `start.sh`'s output. */
export function realNodeFromEnv(env: Record<string, string>): RealNode {
  const get = (k: string) => {
    const v = env[k];
    if (!v) throw new RealNodeError(`start.sh did not print ${k}`);
    return v;
  };
  return {
    kubeconfig: get("KUBECONFIG"),
    kubectl: get("REAL_NODE_KUBECTL"),
    nodeName: get("REAL_NODE_NAME"),
    nodeIp: get("REAL_NODE_IP"),
    containerdAddress: get("REAL_NODE_CONTAINERD_ADDRESS"),
    imagePrefix: get("REAL_NODE_IMAGE_PREFIX"),
    state: get("REAL_NODE_STATE"),
  };
}

/** The sidecar stand-in images `build.sh` makes, by the values field they replace. */
export function standinImages(prefix: string): {
  nodeDriverRegistrar: string;
  livenessProbe: string;
  csiProvisioner: string;
} {
  return {
    nodeDriverRegistrar: `${prefix}/csi-node-driver-registrar:standin`,
    livenessProbe: `${prefix}/livenessprobe:standin`,
    csiProvisioner: `${prefix}/csi-provisioner:standin`,
  };
}

/**
 * The deploy values (`image.*`) that run the driver on the real node: our locally built images
 * (see `scripts/build_images_local.ts`), never pulled, and the stand-ins for the sidecars.
 */
export function realNodeImageValues(
  node: Pick<RealNode, "imagePrefix">,
  registry: string,
  tag: string,
): Record<string, string> {
  return {
    registry,
    tag,
    pullPolicy: "Never",
    ...standinImages(node.imagePrefix),
  };
}

interface ScriptResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function runScript(
  name: string,
  args: string[],
  env: Record<string, string>,
  signal?: AbortSignal,
): Promise<ScriptResult> {
  const r = await new Deno.Command("bash", {
    args: [`${HERE}${name}`, ...args],
    env,
    stdout: "piped",
    stderr: "piped",
    ...(signal ? { signal } : {}),
  }).output();
  const dec = new TextDecoder();
  return { code: r.code, stdout: dec.decode(r.stdout), stderr: dec.decode(r.stderr).trim() };
}

async function script(
  name: string,
  args: string[],
  env: Record<string, string>,
  signal?: AbortSignal,
): Promise<string> {
  const r = await runScript(name, args, env, signal);
  checkScript(name, r);
  return r.stdout;
}

function checkScript(name: string, r: ScriptResult): void {
  const lines = r.stderr.split("\n");
  if (r.code === 3) {
    throw new RealNodeUnavailable((lines.pop() ?? "").replace(/^real_node: SKIP: /, ""));
  }
  if (r.code !== 0) {
    throw new RealNodeError(
      `${name} failed (exit ${r.code}):\n${r.stdout}${lines.slice(-20).join("\n")}`,
    );
  }
}

/** Options of the start/stop wrappers. */
export interface RealNodeOptions {
  /** Extra environment for the scripts (`REAL_NODE_*`, e.g. `REAL_NODE_IMPORT`). */
  readonly env?: Record<string, string>;
  /** Aborts the script (it is killed; run {@link stopRealNode} afterwards). */
  readonly signal?: AbortSignal;
}

/**
 * Starts the node (or reuses a healthy running one) and returns where it is.
 * @throws {RealNodeUnavailable} this machine cannot run it (skip with the message)
 * @throws {RealNodeError} it failed to start (logs under the state dir)
 */
export async function startRealNode(options: RealNodeOptions = {}): Promise<RealNode> {
  const r = await runScript("start.sh", [], options.env ?? {}, options.signal);
  checkScript("start.sh", r);
  return {
    ...realNodeFromEnv(parseEnvLines(r.stdout)),
    startedHere: !/already running/.test(r.stderr),
  };
}

/**
 * Why this machine cannot run a real node (`start.sh --check`: not root, packages missing, no Go
 * and nothing cached, another kubelet), or undefined when it can. Synchronous, for test
 * registration; builds and starts nothing.
 */
export function realNodeSkipReason(env: Record<string, string> = {}): string | undefined {
  if (Deno.build.os !== "linux") return "needs Linux";
  let r: Deno.CommandOutput;
  try {
    r = new Deno.Command("bash", {
      args: [`${HERE}start.sh`, "--check"],
      env,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).outputSync();
  } catch (err) {
    return `cannot run bash: ${err instanceof Error ? err.message : err}`;
  }
  if (r.code === 0) return undefined;
  const last = new TextDecoder().decode(r.stderr).trim().split("\n").pop() ?? "";
  return last.replace(/^real_node: (SKIP|ERROR): /, "") || `start.sh --check exited ${r.code}`;
}

/** Crash the node's kubelet (SIGKILL; containers keep running). */
export async function killKubelet(options: RealNodeOptions = {}): Promise<void> {
  await script("kubelet.sh", ["kill"], options.env ?? {}, options.signal);
}

/** Start the node's kubelet again (same flags); resolves once its healthz answers. */
export async function restartKubelet(options: RealNodeOptions = {}): Promise<void> {
  await script("kubelet.sh", ["start"], options.env ?? {}, options.signal);
}

/**
 * Stops the node and undoes its host changes; fails when `check_clean.sh` finds leftovers (named
 * in the error).
 */
export async function stopRealNode(
  options: RealNodeOptions & { purge?: boolean } = {},
): Promise<void> {
  await script("stop.sh", options.purge ? ["--purge"] : [], options.env ?? {}, options.signal);
}

/** What a stopped node left on the host (empty: nothing). */
export async function realNodeLeftovers(options: RealNodeOptions = {}): Promise<string[]> {
  const r = await runScript("check_clean.sh", [], options.env ?? {}, options.signal);
  if (r.code === 3) throw new RealNodeUnavailable(r.stderr.split("\n").pop() ?? "");
  if (r.code !== 0 && r.code !== 1) {
    throw new RealNodeError(`check_clean.sh failed (exit ${r.code}): ${r.stderr}`);
  }
  return r.stdout.split("\n").filter((l) => l.trim() !== "");
}

/**
 * Start (or reuse) the second node of the running real node (`worker.sh start`); `options.env`
 * may name more OCI archives to import first (`REAL_NODE_IMPORT`, e.g. the driver's images).
 * @throws {RealNodeUnavailable} no real node runs, or this machine cannot run a second one
 * @throws {RealNodeError} it failed to start (logs under `<state>/worker/logs`)
 */
export async function startRealWorker(options: RealNodeOptions = {}): Promise<RealWorker> {
  const r = await runScript("worker.sh", ["start"], options.env ?? {}, options.signal);
  checkScript("worker.sh", r);
  const env = parseEnvLines(r.stdout);
  const get = (k: string) => {
    const v = env[k];
    if (!v) throw new RealNodeError(`worker.sh did not print ${k}`);
    return v;
  };
  return {
    nodeName: get("REAL_NODE_WORKER_NAME"),
    nodeIp: get("REAL_NODE_WORKER_IP"),
    containerdAddress: get("REAL_NODE_WORKER_CONTAINERD_ADDRESS"),
    state: get("REAL_NODE_WORKER_STATE"),
    startedHere: !/already running/.test(r.stderr),
  };
}

/** Stop the second node (its pods, processes, namespaces; the Node object). */
export async function stopRealWorker(options: RealNodeOptions = {}): Promise<void> {
  await script("worker.sh", ["stop"], options.env ?? {}, options.signal);
}
