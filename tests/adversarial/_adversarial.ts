/**
 * Helpers of the adversarial tier: the kubelet-style Go client (built from the Go module proxy),
 * a bare node plugin on the API emulator (no S3, for protocol soaks), a Mountpoint Pod's
 * adversary (a real uid-1000 process that plants and swaps entries in the comm dir), host canaries
 * the node plugin must never read or touch, and thread counts and resident memory of a process.
 *
 * @module
 */
import { type ApiServer, startApiServer } from "../testbed/apiserver/api_server.ts";
import { s3paCrd } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { KubeObject } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { NAMESPACES, NODES, type Resource } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { type Running, runToEnd, spawn, spawnBinary, waitFor } from "../_helpers.ts";

const BUILD = new URL("./kubelet_client/build.sh", import.meta.url).pathname;

let built: Promise<{ bin?: string; skip?: string }> | undefined;

/** Build (once per process) the kubelet-style client; its path, or why it cannot be built. */
export function kubeletClient(): Promise<{ bin?: string; skip?: string }> {
  built ??= (async () => {
    const r = await runToEnd("bash", [BUILD], {
      PATH: Deno.env.get("PATH") ?? "/usr/local/go/bin:/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      ...(Deno.env.get("GOPROXY") ? { GOPROXY: Deno.env.get("GOPROXY")! } : {}),
      ...(Deno.env.get("GOMODCACHE") ? { GOMODCACHE: Deno.env.get("GOMODCACHE")! } : {}),
    });
    const bin = /KUBELET_CLIENT_BIN=(.+)/.exec(r.stdout)?.[1];
    if (r.code === 0 && bin) return { bin };
    if (r.code === 3) return { skip: r.stderr.trim().replace(/^kubelet_client: SKIP: /, "") };
    throw new Error(`building the kubelet client failed: ${r.stderr.slice(-2000)}`);
  })();
  return built;
}

/** Counts printed by the kubelet client. */
export interface SoakResult {
  cycles: number;
  ok: number;
  expectedErrors: number;
  abandoned: number;
  raw: number;
  unexpected: number;
  codes: Record<string, number>;
  firstErrors: string[] | null;
  seconds: number;
}

/** Run the kubelet client against `socket`. */
export async function runKubeletClient(
  bin: string,
  args: {
    socket: string;
    kubeletRoot: string;
    cycles: number;
    workers: number;
    abandonEvery: number;
    rawEvery: number;
    timeout?: string;
  },
): Promise<{ code: number; result: SoakResult | undefined; stderr: string }> {
  const r = await runToEnd(bin, [
    `-socket=${args.socket}`,
    `-kubelet-root=${args.kubeletRoot}`,
    `-cycles=${args.cycles}`,
    `-workers=${args.workers}`,
    `-abandon-every=${args.abandonEvery}`,
    `-raw-every=${args.rawEvery}`,
    `-timeout=${args.timeout ?? "30s"}`,
  ]);
  let result: SoakResult | undefined;
  try {
    result = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "");
  } catch {
    result = undefined;
  }
  return { code: r.code, result, stderr: r.stderr };
}

const CRDS: Resource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
};

/** A node plugin on the API emulator, without S3 (publishes wait for an assignment). */
export interface BareNode extends AsyncDisposable {
  readonly api: ApiServer;
  readonly root: string;
  readonly socket: string;
  readonly node: Running;
}

/** Start {@link BareNode}. */
export async function startBareNode(nodeArgs: string[] = []): Promise<BareNode> {
  const api = await startApiServer({ port: 0 });
  const kube = new RestKubeClient(
    loadKubeConfig((n) => (n === "KUBECONFIG" ? api.kubeconfigPath : undefined)).config,
  );
  await kube.create(CRDS, s3paCrd() as KubeObject);
  await waitFor("the S3PA CRD", () => kube.list(S3PAS).then(() => true, () => false));
  await kube.create(NAMESPACES, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "mount-s3" },
  });
  await kube.create(NODES, { apiVersion: "v1", kind: "Node", metadata: { name: "node-soak" } });
  await kube.close();
  const root = await Deno.makeTempDir({ dir: "/tmp", prefix: "s" });
  const socket = `${root}/csi.sock`;
  const node = spawnBinary("node", [
    "--node-id=node-soak",
    `--kubelet-path=${root}`,
    `--endpoint=unix://${socket}`,
    "--log-format=text",
    "--bucket-check=false",
    ...nodeArgs,
  ], {
    KUBECONFIG: api.kubeconfigPath,
    AWS_ACCESS_KEY_ID: "AKIASOAK",
    AWS_SECRET_ACCESS_KEY: "soakSecret",
  });
  await waitFor("the node plugin to be ready", () => {
    if (/\berror:/.test(node.stderr())) throw new Error(`node plugin failed: ${node.stderr()}`);
    return node.stderr().includes("Node plugin ready");
  }, { timeoutMs: 60_000 });
  return {
    api,
    root,
    socket,
    node,
    async [Symbol.asyncDispose]() {
      await node.stop("SIGTERM").catch(() => {});
      await api.stop();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    },
  };
}

/** Threads of process `pid` (from /proc). */
export async function threadsOf(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? NaN);
}

/** Resident memory of process `pid` in MiB (VmRSS from /proc). */
export async function rssMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  const kib = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
  return Math.round(kib / 1024 * 10) / 10;
}

/** Samples {@link rssMiB} of `pid` every 50 ms until stopped; `peak()` is the largest seen. */
export function rssPeak(pid: number): { peak(): Promise<number> } & AsyncDisposable {
  let peak = 0;
  let stopped = false;
  const sampling = (async () => {
    while (!stopped) {
      peak = Math.max(peak, await rssMiB(pid).catch(() => 0));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const stop = async () => {
    stopped = true;
    await sampling;
    peak = Math.max(peak, await rssMiB(pid).catch(() => 0));
    return peak;
  };
  return { peak: stop, [Symbol.asyncDispose]: async () => void await stop() };
}

/** Whether the process ended (without waiting). */
export async function exited(r: Running): Promise<boolean> {
  return await Promise.race([r.child.status.then(() => true), Promise.resolve(false)]);
}

/** Signs in a process log of a crash inside the runtime (never expected). */
export const CRASH_SIGNS =
  /Assertion `.*' failed|panicked at|Segmentation fault|\(core dumped\)|^Aborted$/m;

/** A shell as uid 1000 (the Mountpoint Pod's user) running `script` in `dir`. */
export function asPodUser(dir: string, script: string): Running {
  return spawn("setpriv", [
    "--reuid=1000",
    "--regid=1000",
    "--clear-groups",
    "bash",
    "-c",
    `cd "$1" && ${script}`,
    "adversary",
    dir,
  ], { env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LC_ALL: "C" } });
}

const HOSTILE_MOUNTER = new URL("./_hostile_mounter.ts", import.meta.url).pathname;

/** A hostile mounter as uid 1000 that plants `mount.error` as `how` (see `_hostile_mounter.ts`). */
export function hostileMounter(how: string): (commDir: string) => Running {
  return (commDir) =>
    spawn("setpriv", [
      "--reuid=1000",
      "--regid=1000",
      "--clear-groups",
      Deno.execPath(),
      "run",
      "-A",
      "--quiet",
      HOSTILE_MOUNTER,
      commDir,
      how,
    ], { env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: "/tmp" } });
}

/** A root-only host file the node plugin must never read, write or follow to. */
export interface Canary extends AsyncDisposable {
  readonly path: string;
  readonly secret: string;
  /** Throws when the file changed (content, owner, mode). */
  check(): Promise<void>;
}

/** Create a {@link Canary} (0600, root). */
export async function canary(): Promise<Canary> {
  const secret = `CANARY-${crypto.randomUUID()}`;
  const path = `/tmp/s3csi-canary-${crypto.randomUUID().slice(0, 8)}`;
  await Deno.writeTextFile(path, `${secret}\n`, { mode: 0o600 });
  await Deno.chmod(path, 0o600);
  const before = await Deno.lstat(path);
  return {
    path,
    secret,
    async check() {
      const now = await Deno.lstat(path);
      const text = await Deno.readTextFile(path);
      if (text !== `${secret}\n` || now.uid !== before.uid || (now.mode! & 0o7777) !== 0o600) {
        throw new Error(`the host file ${path} was changed (uid ${now.uid}, mode ${now.mode})`);
      }
    },
    [Symbol.asyncDispose]: () => Deno.remove(path).catch(() => {}),
  };
}

/** A directory's entries and owner, to show nothing was written or chowned there. */
export async function snapshotDir(dir: string): Promise<string> {
  const s = await Deno.lstat(dir);
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  return JSON.stringify({ uid: s.uid, gid: s.gid, mode: s.mode, names: names.sort() });
}

/** Milliseconds `p` took, with its outcome. */
export async function timed<T>(
  p: Promise<T>,
): Promise<{ ms: number; value?: T; error?: { code?: number; details?: string } }> {
  const t0 = performance.now();
  try {
    const value = await p;
    return { ms: performance.now() - t0, value };
  } catch (err) {
    return { ms: performance.now() - t0, error: err as { code?: number; details?: string } };
  }
}
