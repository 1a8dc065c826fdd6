/**
 * Helpers for tests that run real processes: temp dirs, spawning our binaries from source,
 * bounded waits, and a dummy kubeconfig for binaries that need one but do not call the API.
 *
 * @module
 */
import { fileURLToPath } from "node:url";

/** Repository root (absolute, with trailing slash). */
export const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Entrypoints of the three binaries. */
export const ENTRYPOINTS = {
  node: `${ROOT}src/cmd/node/main.ts`,
  controller: `${ROOT}src/cmd/controller/main.ts`,
  mounter: `${ROOT}src/cmd/mounter/main.ts`,
} as const;

/** Make a temp dir removed by the returned disposer. */
export async function tempDir(prefix = "s3csi-test-"): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix });
  return {
    path,
    [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }).catch(() => {}),
  };
}

export { waitFor } from "../src/util/wait_for.ts";

/** Bytes of the regular files under `dir` (recursively, symlinks not followed) and their count. */
export async function dirUsage(dir: string): Promise<{ bytes: number; files: number }> {
  let bytes = 0;
  let files = 0;
  for await (const e of Deno.readDir(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) {
      const u = await dirUsage(p);
      bytes += u.bytes;
      files += u.files;
    } else if (e.isFile) {
      bytes += (await Deno.lstat(p)).size;
      files++;
    }
  }
  return { bytes, files };
}

/** Paths of everything under `dir`, relative to it (recursively, symlinks not followed). */
export async function listTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    out.push(e.name);
    if (e.isDirectory) {
      out.push(...(await listTree(`${dir}/${e.name}`)).map((n) => `${e.name}/${n}`));
    }
  }
  return out;
}

/** Write a kubeconfig that points at an address nothing listens on; for binaries that only load it. */
export async function writeDummyKubeconfig(dir: string): Promise<string> {
  const path = `${dir}/kubeconfig`;
  await Deno.writeTextFile(
    path,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: dummy}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
  );
  return path;
}

/** A running child process with its output collected. */
export interface Running {
  readonly child: Deno.ChildProcess;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Everything written to stdout so far. */
  stdout(): string;
  /** Send `signal` and wait (bounded) for exit; returns the exit code. */
  stop(signal?: Deno.Signal, timeoutMs?: number): Promise<number>;
}

/** Start a process, collecting stdout and stderr. */
export function spawn(
  cmd: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; clearEnv?: boolean } = {},
): Running {
  const child = new Deno.Command(cmd, {
    args,
    env: options.env ?? {},
    ...(options.clearEnv ? { clearEnv: true } : {}),
    ...(options.cwd ? { cwd: options.cwd } : {}),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out = { stdout: "", stderr: "" };
  const pump = async (stream: ReadableStream<Uint8Array>, key: "stdout" | "stderr") => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) out[key] += decoder.decode(chunk, { stream: true });
  };
  const pumps = Promise.all([pump(child.stdout, "stdout"), pump(child.stderr, "stderr")]);
  let exited: Promise<number> | undefined;
  const status = () => (exited ??= child.status.then(async (s) => (await pumps, s.code)));
  return {
    child,
    stderr: () => out.stderr,
    stdout: () => out.stdout,
    async stop(signal: Deno.Signal = "SIGTERM", timeoutMs = 10_000) {
      try {
        child.kill(signal);
      } catch { /* already exited */ }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<number>((_, reject) => {
        timer = setTimeout(() => {
          try {
            child.kill("SIGKILL");
          } catch { /* gone */ }
          reject(new Error(`process did not exit within ${timeoutMs} ms of ${signal}`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([status(), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Run one of our binaries from source (`deno run -A`). */
export function spawnBinary(
  name: keyof typeof ENTRYPOINTS,
  args: string[],
  env: Record<string, string> = {},
): Running {
  return spawn(Deno.execPath(), ["run", "-A", "--quiet", ENTRYPOINTS[name], ...args], {
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      ...env,
    },
  });
}

/** Run a command to completion and return exit code and output. */
export async function runToEnd(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await new Deno.Command(cmd, {
    args,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: r.code, stdout: d.decode(r.stdout), stderr: d.decode(r.stderr) };
}

/** True when `path` exists. */
export async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

/**
 * Register a test that may not be able to run here. With a `skip` reason it is still registered —
 * `deno test` and the JUnit report count it as skipped — its name ends with `(skipped: reason)`
 * and the reason is printed. Never leave a variant unregistered instead: an unregistered test is
 * neither passed nor skipped, so nobody sees it is missing. Under CI (`CI=true`)
 * `scripts/test.sh` fails the run on any skip.
 */
export function testOrSkip(skip: string | undefined, def: Deno.TestDefinition): void {
  if (skip) Deno.stderr.writeSync(new TextEncoder().encode(`SKIP ${def.name}: ${skip}\n`));
  Deno.test({
    ...def,
    name: skip ? `${def.name} (skipped: ${skip})` : def.name,
    ignore: skip !== undefined || def.ignore === true,
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Why the real kube-apiserver tier cannot be used by a test, or undefined when it can. */
export function realTierSkipReason(): string | undefined {
  return Deno.env.get("KUBE_REAL_KUBECONFIG")
    ? undefined
    : "KUBE_REAL_KUBECONFIG not set: no real kube-apiserver tier (scripts/test.sh starts one; see tests/testbed/services/kube_real/README.md)";
}

/**
 * The kubectl the suite uses: `KUBECTL` (scripts/test.sh exports the one
 * `tests/testbed/services/kube_real/build.sh` built, at the Kubernetes release the real tier pins),
 * else that build's place in the cache; never the machine's kubectl. Undefined when not built.
 */
export function kubectlPath(): string | undefined {
  const fromEnv = Deno.env.get("KUBECTL");
  if (fromEnv) return fromEnv;
  const goMod = Deno.readTextFileSync(`${ROOT}tests/testbed/services/kube_real/go/go.mod`);
  const version = /^\s*k8s\.io\/kubernetes (v\S+)/m.exec(goMod)?.[1];
  const cache = Deno.env.get("KUBE_REAL_CACHE") ?? "/var/cache/s3csi-kube-real";
  const path = `${cache}/${version}/bin/kubectl`;
  try {
    return Deno.statSync(path).isFile ? path : undefined;
  } catch {
    return undefined;
  }
}

/** Why tests running kubectl cannot run here, or undefined. */
export function kubectlSkipReason(): string | undefined {
  return kubectlPath()
    ? undefined
    : "no kubectl built: run scripts/setup.sh (it builds kubectl with tests/testbed/services/kube_real/build.sh) or set KUBECTL";
}

/** Result of {@link kubectl}. */
export interface KubectlResult {
  /** Exit code. */
  readonly code: number;
  /** Standard output. */
  readonly stdout: string;
  /** Standard error. */
  readonly stderr: string;
}

/**
 * Run the suite's `kubectl` ({@link kubectlPath}: built from the real tier's Go module, never the
 * machine's) with `KUBECONFIG=kubeconfig`, bounded by `timeoutMs`.
 */
export async function kubectl(
  kubeconfig: string,
  args: readonly string[],
  options: { stdin?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  const bin = kubectlPath();
  if (!bin) throw new Error(kubectlSkipReason());
  const cmd = new Deno.Command(bin, {
    args: [...args],
    env: { KUBECONFIG: kubeconfig, HOME: Deno.env.get("HOME") ?? "/tmp" },
    stdin: options.stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(options.timeoutMs ?? 20_000),
  });
  const child = cmd.spawn();
  if (options.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(options.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** The `p`-th percentile (0-100) of `values` (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  ]!;
}
